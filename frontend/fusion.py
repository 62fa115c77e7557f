"""Pass 2: composite ops back into one kernel each, as the real compiler runs them.

Pass 1 spells softmax and layer norm in primitives, and models spell RMS norm, SiLU and the
tanh GELU in primitives themselves. Each pattern below finds the primitive chain that ends in
one node and replaces the chain with one kernel: ``softmax``, ``layernorm``, ``rmsnorm``,
``silu``, ``gelufwd``. The fused node keeps the chain (``unfused``), so that when the lowering
refuses the fused op the chain runs on the card instead of a CPU fallback.

GELU with the tanh approximation becomes the card's GELU (erf): the two differ by less than
5e-4 anywhere, below fp16 tolerances.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import torch

from .graph import Graph, Node, Value

GELU_TANH_SCALE = math.sqrt(2 / math.pi)


class _Chains:
    """Who produces each value and how many nodes (and graph outputs) read it."""

    def __init__(self, graph: Graph):
        self.by_output = {n.outputs[0]: n for n in graph.nodes if n.is_kernel}
        self.uses = Counter(v for n in graph.nodes for v in n.inputs)
        self.uses.update(v for v in graph.outputs if isinstance(v, Value))
        self.dead: set[int] = set()  # ids of kernels removed by ``replace``, still in graph.nodes

    def replace(self, graph: Graph, at: int, fused: Node) -> list[Node]:
        """Put ``fused`` in the place of the kernel at ``at``, then find the kernels that fed only
        the replaced one's inputs and are read no more (in a graph where every kernel was read);
        return them in program order. They all come before ``at`` (each feeds it), so ``fuse`` leaves
        them in ``graph.nodes`` until its scan is past and removes them at once (``self.dead``): one
        pass over the nodes per pattern, not one per fusion (120 fusions of 3,000 nodes in a 40-layer
        decode)."""
        node, graph.nodes[at] = graph.nodes[at], fused
        self.by_output[fused.outputs[0]] = fused
        self.uses.subtract(node.inputs)
        self.uses.update(fused.inputs)
        dead: list[Node] = []
        todo = list(node.inputs)
        while todo:
            v = todo.pop()
            maker = self.by_output.get(v)
            if maker is not None and self.uses[v] == 0:
                del self.by_output[v]
                dead.append(maker)
                self.uses.subtract(maker.inputs)
                todo += maker.inputs
        self.dead.update(id(n) for n in dead)
        return _in_order(dead)

    def sweep(self, graph: Graph) -> None:
        """Remove the kernels ``replace`` found dead."""
        if self.dead:
            graph.nodes = [n for n in graph.nodes if id(n) not in self.dead]
            self.dead.clear()

    def made_by(self, v: Value, op: str, single_use: bool = True) -> Node | None:
        node = self.by_output.get(v)
        if node is None or node.op != op or (single_use and self.uses[v] > 1):
            return None
        return node

    def scalar(self, v: Value) -> float | None:
        return float(v.const.reshape(-1)[0]) if v.const is not None and v.const.numel() == 1 else None

    def clamped(self, v: Value, bound: Callable[[float], bool]) -> Value | None:
        """``x`` when ``v`` is ``maximum(x, k)`` with a constant ``k`` that ``bound`` accepts, else None."""
        node = self.made_by(v, "maximum")
        k = node and self.scalar(node.inputs[1])
        return node.inputs[0] if k is not None and bound(k) else None

    def times_const(self, v: Value, value: float, rel: float = 1e-3) -> Value | None:
        """``x`` when ``v`` is ``x * value`` (either order), else None."""
        node = self.made_by(v, "mul")
        if node is None:
            return None
        for a, c in (node.inputs, node.inputs[::-1]):
            k = self.scalar(c)
            if k is not None and math.isclose(k, value, rel_tol=rel):
                return a
        return None


def _last(node: Node | None) -> bool:
    return node is not None and node.attrs.get("dims") == (len(node.inputs[0].shape) - 1,)


def _softmax(c: _Chains, n: Node) -> tuple[str, list[Value], dict] | None:
    """exp(x [- max]) / sum; safe when the sum is clamped to 1 and the max to the lowest finite value."""
    if n.op != "realdiv":
        return None
    e, s = n.inputs
    floor = c.clamped(s, lambda k: k == 1.0)
    total, ex = c.made_by(floor or s, "sum"), c.made_by(e, "exp", single_use=False)
    if not (_last(total) and ex is not None and total.inputs[0] is e and c.uses[e] == 2):
        return None
    shifted = c.made_by(ex.inputs[0], "sub")
    if shifted is not None:
        lowest = c.clamped(shifted.inputs[1], lambda k: k == torch.finfo(shifted.inputs[0].dtype).min)
        top = c.made_by(lowest or shifted.inputs[1], "max")
        if _last(top) and top.inputs[0] is shifted.inputs[0] and (floor is None) == (lowest is None):
            return "softmax", [shifted.inputs[0]], {"safe": True} if floor else {}
    return None if floor else ("softmax", [ex.inputs[0]], {})


def _norm_scale(c: _Chains, r: Value) -> tuple[Value, float] | None:
    """(t, eps) when ``r`` is rsqrt(mean(t * t over the last dim) + eps)."""
    node = c.made_by(r, "rsqrt")
    plus = node and c.made_by(node.inputs[0], "add")
    if not plus or (eps := c.scalar(plus.inputs[1])) is None:
        return None
    var = c.made_by(plus.inputs[0], "mean")
    square = _last(var) and c.made_by(var.inputs[0], "mul")
    if not square or square.inputs[0] is not square.inputs[1]:
        return None
    return square.inputs[0], eps


def _norms(c: _Chains, n: Node) -> tuple[str, list[Value], dict] | None:
    """x * rsqrt(mean(x^2) + eps) [* w] -> rmsnorm; (x - mean) * rstd [* w] [+ b] -> layernorm."""
    bias = None
    if n.op == "add" and (inner := c.made_by(n.inputs[0], "mul")) is not None:
        n, bias = inner, n.inputs[1]
    weight = None
    inner = c.made_by(n.inputs[0], "mul") if n.op == "mul" else None
    if inner is not None and c.made_by(n.inputs[1], "rsqrt") is None:
        n, weight = inner, n.inputs[1]
    if n.op != "mul" or (found := _norm_scale(c, n.inputs[1])) is None or found[0] is not n.inputs[0]:
        return None
    x, eps = found
    centred = c.made_by(x, "sub", single_use=False)
    if centred is not None and _last(mean := c.made_by(centred.inputs[1], "mean")) and \
            mean.inputs[0] is centred.inputs[0]:
        if weight is None or bias is None:
            return None  # the layer norm kernel takes both; pass 1 always gives them for nn.LayerNorm
        return "layernorm", [centred.inputs[0], weight, bias], {"eps": eps}
    if bias is not None or weight is None:
        return None
    return "rmsnorm", [x, weight], {"eps": eps}


def _silu(c: _Chains, n: Node) -> tuple[str, list[Value], dict] | None:
    if n.op != "mul":
        return None
    for x, s in (n.inputs, n.inputs[::-1]):
        sig = c.made_by(s, "sigmoid")
        if sig is not None and sig.inputs[0] is x:
            return "silu", [x], {}
    return None


def _gelu_tanh(c: _Chains, n: Node) -> tuple[str, list[Value], dict] | None:
    """0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3)))."""
    if n.op != "mul":
        return None
    for half, rest in (n.inputs, n.inputs[::-1]):
        x = c.times_const(half, 0.5)
        one = c.made_by(rest, "add")
        th = one and c.scalar(one.inputs[1]) == 1.0 and c.made_by(one.inputs[0], "tanh")
        inner = th and c.times_const(th.inputs[0], GELU_TANH_SCALE)
        plus = inner and c.made_by(inner, "add")
        cube = plus and plus.inputs[0] is x and c.times_const(plus.inputs[1], 0.044715)
        if cube is not None and x is not None and _is_cube(c, cube, x):
            return "gelufwd", [x], {}
    return None


def _is_cube(c: _Chains, v: Value, x: Value) -> bool:
    outer = c.made_by(v, "mul")
    if outer is None:
        return False
    for a, b in (outer.inputs, outer.inputs[::-1]):
        sq = c.made_by(b, "mul")
        if a is x and sq is not None and sq.inputs == [x, x]:
            return True
    return False


PATTERNS = (_softmax, _norms, _silu, _gelu_tanh)


def fuse(graph: Graph) -> None:
    """Replace each matched chain by one kernel that remembers the chain (``unfused``). The first
    fusion removes every kernel nothing reads; after it, only those a fusion stopped reading can be."""
    swept = False
    for pattern in PATTERNS:
        at, chains = 0, _Chains(graph)
        while at < len(graph.nodes):
            node = graph.nodes[at]
            found = pattern(chains, node) if node.is_kernel else None
            if found is not None:
                op, inputs, attrs = found
                fused = Node(op, inputs, node.outputs, node.fx, attrs)
                if swept:
                    fused.unfused = [*chains.replace(graph, at, fused), node]
                else:
                    graph.nodes[at] = fused
                    fused.unfused, chains, swept = [*_drop_unread(graph), node], _Chains(graph), True
                    at = graph.nodes.index(fused)
            at += 1
        chains.sweep(graph)


def _drop_unread(graph: Graph) -> list[Node]:
    """Remove the kernels nothing reads any more; return them in program order."""
    dropped: list[Node] = []
    while True:
        read = {v for n in graph.nodes for v in n.inputs} | {v for v in graph.outputs if isinstance(v, Value)}
        dead = [n for n in graph.nodes if n.is_kernel and n.outputs[0] not in read]
        if not dead:
            return _in_order(dropped)
        dropped += dead
        graph.nodes = [n for n in graph.nodes if n not in dead]


def _in_order(nodes: list[Node]) -> list[Node]:
    return sorted(nodes, key=lambda n: int(n.outputs[0].name[1:]))
