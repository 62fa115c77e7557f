"""Tensor parallelism: the ATen graph -> one card's graph of N identical shards, with collectives.

Megatron-style, found from the graph rather than declared: a matmul of a replicated activation by a
weight (a graph input, through views) is column-parallel, each card holding a slice of the weight's
output columns, so its result is sharded along its last dim; the ops after it keep the sharding
(pointwise ops, reductions over other dims, the views of attention heads, batched matmuls over
sharded heads, whose KV cache inputs are sliced alike); a matmul of that sharded activation by a
weight is row-parallel, each card holding a slice of the weight's rows, and its partial sums are
all-reduced at once. A transformer layer so gets two all-reduces, after attention's output
projection and after the MLP's down projection. Anything else that meets a sharded value (a norm
over the sharded dim, a slice across it) gets it all-gathered first, so every graph shards
correctly; it may only shard less.

Each card's graph is the same graph over its own slices (the shapes of card 0, whose kernel
programs every card runs); the runtime slices the inputs per card (``ShardPlan.card_inputs``) and
puts the sharded outputs back together (``ShardPlan.assemble``: the host reads each card's slice,
as it reads any output).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp

from .collectives import all_gather, all_reduce

aten = torch.ops.aten
Dim = int | None          # a value's placement: the dim each card holds a slice of, or None (replicated)

RESHAPES = {aten.view, aten._unsafe_view, aten.reshape}
SAME = {aten.clone, aten.alias, aten._to_copy}
CHAIN = RESHAPES | SAME | {aten.permute, aten.expand, aten.unsqueeze, aten.t, aten.transpose}
REDUCTIONS = {aten.sum, aten.mean, aten.amax, aten.amin}
SOFTMAX = {aten._softmax, aten._safe_softmax, aten._log_softmax}


@dataclass
class ShardPlan:
    """``gm``: one card's graph; ``inputs``/``outputs``: per graph input and output, the dim each card
    holds a slice of (None: the whole)."""

    gm: torch.fx.GraphModule
    cards: int
    inputs: list[Dim]
    outputs: list[Dim]

    def card_inputs(self, args: tuple[Any, ...], card: int) -> list[Any]:
        return [a if d is None else a.chunk(self.cards, d)[card] for a, d in zip(args, self.inputs, strict=True)]

    def assemble(self, per_card: list[list[Any]]) -> list[Any]:
        return [outs[0] if d is None or outs[0] is None else torch.cat(outs, d)
                for d, outs in zip(self.outputs, zip(*per_card, strict=True), strict=True)]


def shard(gm: torch.fx.GraphModule, cards: int) -> ShardPlan:
    """One card's graph of ``gm`` over ``cards`` cards (1: the graph itself)."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if cards == 1:
        outs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
        return ShardPlan(gm, 1, [None] * len(placeholders), [None] * len(outs))
    planner = _Planner(cards)
    for node in gm.graph.nodes:
        planner.visit(node)
    card_gm = _emit(gm, planner)
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    fakes = [_card_fake(mode, n.meta["val"], planner.place[n], cards) for n in placeholders]
    FakeTensorProp(card_gm, mode).propagate(*fakes)
    out = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    return ShardPlan(card_gm, cards, [planner.place[n] for n in placeholders],
                     [planner.place.get(o) if isinstance(o, torch.fx.Node) else None for o in out])


def _card_fake(mode: FakeTensorMode, val: Any, dim: Dim, cards: int) -> Any:
    if not isinstance(val, torch.Tensor):
        return val
    shape = list(val.shape)
    if dim is not None:
        shape[dim] //= cards
    with mode:
        return torch.empty(shape, dtype=val.dtype, device=val.device)


def _packet(node: torch.fx.Node) -> Any:
    return getattr(node.target, "overloadpacket", node.target)


def _shape(node: Any) -> tuple[int, ...] | None:
    val = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    return tuple(val.shape) if isinstance(val, torch.Tensor) else None


class _Planner:
    """Decides, node by node in program order, where each value is sharded, which matmuls are
    row-parallel (``partial``) and which operands are all-gathered first (``gather``)."""

    def __init__(self, cards: int):
        self.cards = cards
        self.place: dict[torch.fx.Node, Dim] = {}
        self.partial: set[torch.fx.Node] = set()
        self.gather: dict[torch.fx.Node, set[torch.fx.Node]] = {}

    def visit(self, node: torch.fx.Node) -> None:
        if node.op != "call_function":
            self.place[node] = None
            return
        tensors = [a for a in node.all_input_nodes if _shape(a) is not None]
        if node.target is operator.getitem or _shape(node) is None:
            self._gather_all(node, tensors)
            return
        ruled = self._rule(node, tensors)
        if ruled is None:
            self._gather_all(node, tensors)
            return
        out, demands, partial = ruled
        chains = [self._chain(n, d) for n, d in demands]
        if any(c is None for c in chains):
            self._gather_all(node, tensors)
            return
        for chain in chains:
            self.place.update(chain)
        self.place[node] = out
        if partial:
            self.partial.add(node)

    def _gather_all(self, node: torch.fx.Node, tensors: list[torch.fx.Node]) -> None:
        """The op runs on whole values: its sharded operands are all-gathered first."""
        self.gather[node] = {a for a in tensors if self.place.get(a) is not None}
        self.place[node] = None

    def _chain(self, node: torch.fx.Node, dim: int) -> list[tuple[torch.fx.Node, int]] | None:
        """A replicated operand wanted sharded along ``dim``: possible when it is a graph input (a
        weight, a KV cache) seen through views and used by nothing else; each card then holds its
        slice. The nodes back to that input with their new placements, or None."""
        steps: list[tuple[torch.fx.Node, int]] = []
        while self.place.get(node) != dim:
            if self.place.get(node) is not None or len(node.users) != 1:
                return None
            if node.op == "placeholder":
                return steps + [(node, dim)] if _shape(node)[dim] % self.cards == 0 else None
            if node.op != "call_function" or _packet(node) not in CHAIN:
                return None
            src = node.args[0]
            back = [i for i, n in enumerate(_shape(src)) if n % self.cards == 0 and self._map(node, i) == dim]
            if not back:
                return None
            steps.append((node, dim))
            node, dim = src, back[0]
        return steps

    def _rule(self, node: torch.fx.Node, tensors: list[torch.fx.Node]) -> tuple[Dim, list, bool] | None:
        """(output placement, operands to shard: (node, dim), row-parallel?) or None: gather all."""
        op, places = _packet(node), [self.place.get(a) for a in tensors]
        if op in (aten.mm, aten.addmm, aten.bmm):
            return self._matmul(node)
        if all(p is None for p in places):
            return None, [], False
        if op in CHAIN or op in (aten.slice, aten.select, aten.squeeze):
            out = self._map(node, self.place[node.args[0]]) if len(tensors) == 1 else None
            return None if out is None else (out, [], False)
        if op in REDUCTIONS or op in SOFTMAX:
            return self._reduction(node)
        if op is aten.cat:
            return self._pointwise(node, list(node.args[0]), exclude=node.args[1] if len(node.args) > 1 else 0)
        if torch.Tag.pointwise in getattr(node.target, "tags", ()):
            return self._pointwise(node, tensors)
        return None

    def _map(self, node: torch.fx.Node, d: Dim) -> Dim:
        """Where a view op puts its input's sharded dim ``d`` (None: the slices would not be whole)."""
        if d is None:
            return None
        op, src, out = _packet(node), _shape(node.args[0]), _shape(node)
        if op in RESHAPES:
            return _regroup(src, out, d, self.cards)
        if op in SAME:
            return d
        if op is aten.permute:
            return [p % len(src) for p in node.args[1]].index(d)
        if op is aten.t:
            return 1 - d if len(src) == 2 else d
        if op is aten.transpose:
            a, b = (x % len(src) for x in node.args[1:3])
            return b if d == a else a if d == b else d
        if op is aten.expand:
            return d + len(out) - len(src)
        if op is aten.unsqueeze:
            k = node.args[1] % len(out)
            return d + (k <= d)
        if op in (aten.slice, aten.select, aten.squeeze) and node.target != aten.squeeze.default:
            cut = node.args[1] if len(node.args) > 1 else 0
            cut = [c % len(src) for c in (cut if isinstance(cut, list | tuple) else [cut])]
            if d in cut:
                return None
            return d if op is aten.slice else d - sum(c < d for c in cut)
        return None

    def _matmul(self, node: torch.fx.Node) -> tuple[Dim, list, bool] | None:
        """Column-parallel (R x weight -> sharded columns), row-parallel (sharded K -> partial sums,
        all-reduced), or a batched matmul over sharded batches (attention heads)."""
        a, b = node.args[1:3] if _packet(node) is aten.addmm else node.args[:2]
        pa, pb = self.place.get(a), self.place.get(b)
        last = len(_shape(node)) - 1
        bias = [node.args[0]] if _packet(node) is aten.addmm else []
        if pa is None and pb is None:
            if _packet(node) is aten.bmm or _shape(b)[-1] % self.cards or self._chain(b, last) is None:
                return None, [], False
            return last, [(b, last), *((x, len(_shape(x)) - 1) for x in bias)], False
        if pa == last and pb in (None, last - 1):
            return None, [(b, last - 1)], True
        if _packet(node) is aten.bmm and pa in (0, None) and pb in (0, None):
            return 0, [(x, 0) for x, p in ((a, pa), (b, pb)) if p is None], False
        if pa == last - 1 and pb is None and not bias:
            return last - 1, [], False
        return None

    def _reduction(self, node: torch.fx.Node) -> tuple[Dim, list, bool] | None:
        d, rank = self.place[node.args[0]], len(_shape(node.args[0]))
        dims = node.args[1] if len(node.args) > 1 else None
        if dims is None:
            return None
        dims = [x % rank for x in (dims if isinstance(dims, list | tuple) else [dims])]
        if d in dims:
            return None
        keep = _packet(node) in SOFTMAX or (node.args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False))
        return d if keep else d - sum(x < d for x in dims), [], False

    def _pointwise(self, node: torch.fx.Node, operands: list[Any], exclude: int | None = None
                   ) -> tuple[Dim, list, bool] | None:
        """Broadcasting operands: the sharded ones must agree on the output dim; a replicated one that
        is not broadcast along it is sliced alike (or the op gathers)."""
        rank = len(_shape(node))
        tensors = [a for a in operands if _shape(a) is not None]
        dims = {self.place[a] + rank - len(_shape(a)) for a in tensors if self.place.get(a) is not None}
        if len(dims) != 1:
            return None
        (d,) = dims
        if exclude is not None and d == exclude % rank:
            return None
        demands = []
        for a in tensors:
            k = d - (rank - len(_shape(a)))
            if self.place.get(a) is None and k >= 0 and _shape(a)[k] > 1:
                demands.append((a, k))
        return d, demands, False


def _regroup(src: tuple[int, ...], out: tuple[int, ...], d: int, cards: int) -> Dim:
    """A reshape keeps a slice along ``d`` whole when ``d`` is the outermost dim (of size > 1) of its
    group of merged or split dims and the group's outermost output dim divides by ``cards``."""
    i = j = 0
    while i < len(src) or j < len(out):
        i0, j0 = i, j
        pa = src[i] if i < len(src) else 1
        pb = out[j] if j < len(out) else 1
        i, j = i + 1, j + 1
        while pa != pb:
            if pa < pb:
                pa, i = pa * src[i], i + 1
            else:
                pb, j = pb * out[j], j + 1
        if i0 <= d < i:
            if src[d] % cards or any(src[k] > 1 for k in range(i0, d)):
                return None
            o = next(k for k in range(j0, j) if out[k] > 1)
            return o if out[o] % cards == 0 else None
    return None


def _emit(gm: torch.fx.GraphModule, planner: _Planner) -> torch.fx.GraphModule:
    """One card's graph: views and expands over card shapes, all-reduces after row-parallel matmuls
    (a bias added after), all-gathers where an op needs whole values."""
    graph, env, gathered = torch.fx.Graph(), {}, {}
    cards = planner.cards

    def operand(user: torch.fx.Node, n: torch.fx.Node) -> torch.fx.Node:
        if n not in planner.gather.get(user, ()):
            return env[n]
        if n not in gathered:
            gathered[n] = graph.call_function(all_gather, (env[n], planner.place[n], cards))
        return gathered[n]

    for node in gm.graph.nodes:
        if node.op == "output":
            graph.output(torch.fx.node.map_arg(node.args[0], lambda n: env[n]))
            continue
        new = graph.node_copy(node, lambda n, user=node: operand(user, n))
        d = planner.place.get(node)
        if d is not None and _packet(node) in RESHAPES | {aten.expand}:
            shape = list(_shape(node))
            shape[d] //= cards
            new.args = (new.args[0], shape, *new.args[2:])
        if node in planner.partial:
            bias = None
            if _packet(node) is aten.addmm:
                bias, new.target, new.args = new.args[0], aten.mm.default, new.args[1:3]
            new = graph.call_function(all_reduce, (new, cards))
            if bias is not None:
                new = graph.call_function(aten.add.Tensor, (new, bias))
        env[node] = new
    return torch.fx.GraphModule(gm, graph)

