"""Attention whose scores do not fit in LX, as tiles of its query rows, each tile one fused chain.

Pass 4 keeps a row chain's tensors in LX (work_division.py ``_align``) only when one split of it fits there.
When the whole chain does not (Granite-3.3-8B's 32 heads at 1,024 tokens: 16,384 score sticks per core against
half of usable LX), its kernels kept their own splits and the scores crossed DRAM several times. Attention's rows
are independent: Q·Kᵀ, the scale, the mask and softmax of query rows a..b need only Q's rows a..b (and the mask's),
and P·V's rows a..b only those probabilities. So the chain is cut into tiles of query rows whose scores fit
(``work_division.query_tiles``: the fewest that fit, of whole PT passes but the last, their count not only one
dividing the rows, so a prime prompt length is tiled too), each tile the chain's kernels over its rows,
reading its window of Q (and of a mask that varies along the rows: restickify kernels with a window, as a
slice's) and writing its rows of the output, a fused kernel keeping its chain; a ``cat`` kernel (DMA only) joins
the tiles' outputs into the chain's output value, which the rest of the graph reads as before. The rewrite is on
the graph before work division, so the later passes see ordinary kernels: each tile is aligned and fused as a
chain that fits.
"""

from __future__ import annotations

import math

import numpy as np

from spyre_emu.config import DTYPE_BYTES, STICK_BYTES, Machine

from .graph import Graph, Node, Value
from .layout import RESTICKIFY
from .work_division import Window, divisors, query_tiles, row_chains

Cuts = tuple[tuple[int, int, int], ...]  # (dim, start, stop) of the dims a tile's window narrows


def tile_queries(graph: Graph, nodes: list[Node], machine: Machine, cores: int) -> bool:
    """Rewrite ``nodes`` (the graph's nodes before the layout pass, whose result ``graph`` holds) so that each
    attention chain whose scores do not fit runs as tiles of heads × query rows; whether any did."""
    tiled = False
    for chain in row_chains(graph):
        block = _block(graph, nodes, chain)
        if block is None:
            continue
        groups, rows = query_tiles(graph, chain, machine, cores, _group_sizes(block), _windows(graph, block))
        if len(groups) * len(rows) == 1:
            continue
        made: dict[tuple[Value, Cuts], Value] = {}
        parts = [[_tile(block, xs, r, f"x{g}_q{q}", made) for q, r in enumerate(rows)] for g, xs in enumerate(groups)]
        tail = chain[-1]
        at = nodes.index(tail)
        nodes[at:at + 1] = [*(n for group in parts for p in group for n in p), *_joined(tail, parts)]
        for node in block[:-1]:
            nodes.remove(node)
        tiled = True
    return tiled


def _joined(tail: Node, parts: list[list[list[Node]]]) -> list[Node]:
    """The cat kernels joining the tiles' outputs into the chain's: each head group's row tiles along the rows, then
    the groups along the batch dim (P·V's output is (batch, rows, columns)); a single part needs no cat."""
    out = tail.outputs[0]
    groups = [[p[-1].outputs[0] for p in group] for group in parts]
    cats, joined = [], []
    for g, tiles in enumerate(groups):
        if len(tiles) == 1:
            joined.append(tiles[0])
            continue
        shape = (*tiles[0].shape[:-2], out.shape[-2], out.shape[-1])
        value = out if len(groups) == 1 else Value(f"{out.name}_x{g}", shape, out.dtype, carrier=out.carrier)
        cats.append(Node("cat", tiles, [value], tail.fx, {"along": len(out.shape) - 2}, name=f"{tail.name}_cat{g}"))
        joined.append(value)
    if len(joined) > 1:
        cats.append(Node("cat", joined, [out], tail.fx, {"along": len(out.shape) - 3}, name=f"{tail.name}_cat"))
    if len(cats) == 1:
        cats[0].name = f"{tail.name}_cat"
    return cats


def _group_sizes(block: list[Node]) -> list[int]:
    """The head group sizes a tiling may take: divisors of the batch dim whose groups are boxes of every value of the
    block (its leading dims, the batch dim x or (batch, heads) around the pointwise kernels), so that each tile's
    values are the block's narrowed and a window of an input is a restickify's box."""
    leads = {node.outputs[0].shape[:-2] for node in block}
    x = math.prod(next(iter(leads)))
    return [g for g in divisors(x) if all(_box(lead, a, a + g) for lead in leads for a in range(0, x, g))]


def _windows(graph: Graph, block: list[Node]) -> list[Window]:
    """The block's inputs a tile reads through windows copied on the card (a window of a folded constant, a causal
    mask, is folded with it): bytes, a row's bytes in whole sticks, whether they vary along the batch dim and along
    the query rows."""
    values = {v for node in block for v in node.outputs}
    out = []
    for node in block:
        for i, v in enumerate(node.inputs):
            tensor = graph.tensors.get(node.tensors[i]) if node.is_kernel else None
            if v in values or tensor is None or (tensor.upload and v.root not in graph.inputs):
                continue
            rank, lead = len(v.shape), node.outputs[0].shape[:-2]
            along_x = any(n > 1 for n in v.shape[:max(rank - 2, 0)]) and math.prod(lead) > 1
            row = -(-tensor.dshape[-1] * DTYPE_BYTES[tensor.dtype] // STICK_BYTES) * STICK_BYTES
            out.append((math.prod(tensor.dshape) * DTYPE_BYTES[tensor.dtype], row, along_x, _along_rows(node, i)))
    return out


def _block(graph: Graph, nodes: list[Node], chain: list[Node]) -> list[Node] | None:
    """The chain's kernels and the views between them, in order; None when a view changes the rows or columns,
    or a node outside the block (or the call's result) reads a value the block hands on."""
    kernels, inner = set(chain), {chain[0].outputs[0]}
    block = []
    for node in nodes[nodes.index(chain[0]):nodes.index(chain[-1]) + 1]:
        if node in kernels or (node.host == "view" and node.inputs[0] in inner):
            if node not in kernels and not (node.attrs.get("regroup")
                                            and node.inputs[0].shape[-2:] == node.outputs[0].shape[-2:]):
                return None
            block.append(node)
            inner.update(node.outputs if node is not chain[-1] else ())
    outside = [n for n in nodes if n not in block and inner.intersection(n.inputs)]
    return None if outside or inner.intersection(graph.outputs) else block


def _tile(block: list[Node], xs: tuple[int, int], rows: tuple[int, int], tag: str,
          made: dict[tuple[Value, Cuts], Value], tiles: dict[Value, Value] | None = None) -> list[Node]:
    """The block over the head group ``xs`` (a range of the batch dim) and query rows ``rows``: each value a tile of
    its own (``tiles``: the block's values to their tiles), inputs the tile narrows read through windows (``made``:
    a window made by an earlier tile, Kᵀ and V for the group's other row tiles, a causal mask's rows for the other
    groups, is read again). A fused kernel's tile keeps its chain (``unfused``) tiled alike, over the same tiles of
    the values it reads and writes, so that a tile the lowering refuses runs its chain on the card (compile.py), as
    the untiled kernel would, not on the CPU; the windows it makes are its own."""
    tiles = {} if tiles is None else tiles
    out: list[Node] = []
    for node in block:
        inputs = []
        for i, v in enumerate(node.inputs):
            cuts = () if v in tiles else _cuts(node, i, xs, rows)
            if cuts and (v, cuts) not in made:
                made[v, cuts] = window = _narrowed(v, cuts, f"{node.name}_{tag}_in{i}")
                out.append(Node(RESTICKIFY, [v], [window], node.fx, {"slice": (cuts, False)},
                                name=f"{node.name}_{tag}_window{i}"))
            inputs.append(tiles[v] if v in tiles else made[v, cuts] if cuts else v)
        value = node.outputs[0]
        lead = _box(value.shape[:-2], *xs)
        tiles.setdefault(value, _narrowed(value, ((len(lead), *rows), *((d, *c) for d, c in enumerate(lead))),
                                          f"{value.name}_{tag}"))  # a chain's last: its kernel's
        attrs = {"regroup": True} if node.host == "view" else dict(node.attrs)
        tile = Node(node.op, inputs, [tiles[value]], node.fx, attrs, node.host, node.reason, name=f"{node.name}_{tag}")
        tile.unfused = _tile(node.unfused, xs, rows, tag, dict(made), tiles)
        out.append(tile)
    return out


def _cuts(node: Node, i: int, xs: tuple[int, int], rows: tuple[int, int]) -> Cuts:
    """The dims of the block's kernel ``node``'s input ``i`` (not a value of the block) a tile narrows, as (dim,
    start, stop): each leading dim it does not broadcast along, to the tile's box of its heads (Q, Kᵀ, V, a mask per
    head), and its rows when read by query rows (``_along_rows``), each only where it is not the whole dim."""
    v, out = node.inputs[i], node.outputs[0].shape
    lead, rank = _box(out[:-2], *xs), len(v.shape)
    box = [(0, n) if n == 1 else lead[d + len(out) - rank] for d, n in enumerate(v.shape[:max(rank - 2, 0)])]
    if _along_rows(node, i):
        box.append(rows)
    return tuple((d, a, b) for d, (a, b) in enumerate(box) if (a, b) != (0, v.shape[d]))


def _along_rows(node: Node, i: int) -> bool:
    """Whether the block's kernel ``node`` reads its input ``i`` (not a value of the block) by query rows: a
    matmul's A (the head's Q; B, Kᵀ or V, is read whole along its rows), or a pointwise operand not broadcast along
    the rows (a causal mask; not the scale, nor a key-padding mask of one row)."""
    v = node.inputs[i]
    return i == 0 if node.op == "batchmatmul" else len(v.shape) > 1 and v.shape[-2] > 1


def _box(lead: tuple[int, ...], a: int, b: int) -> list[tuple[int, int]] | None:
    """Flat indices ``a:b`` of dims ``lead`` (a head group's batches, (batch, heads) in a 4-D view) as a (start,
    stop) per dim, or None when they are not a box: the box from the first index's digits to the last's holds
    only indices between the two, so it is the range exactly when it has as many."""
    first, last = (np.unravel_index(i, lead) if lead else () for i in (a, b - 1))
    box = [(int(f), int(t) + 1) for f, t in zip(first, last, strict=True)]
    return box if all(f < t for f, t in box) and math.prod(t - f for f, t in box) == b - a else None


def _narrowed(v: Value, cuts: Cuts, name: str) -> Value:
    """A value like ``v`` narrowed along each (dim, start, stop) of ``cuts``."""
    shape = list(v.shape)
    for d, a, b in cuts:
        shape[d] = b - a
    return Value(name, tuple(shape), v.dtype, carrier=v.carrier)
