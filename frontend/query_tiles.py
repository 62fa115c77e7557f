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

from spyre_emu.config import Machine

from .graph import Graph, Node, Value
from .layout import RESTICKIFY
from .work_division import query_tiles, row_chains


def tile_queries(graph: Graph, nodes: list[Node], machine: Machine, cores: int) -> bool:
    """Rewrite ``nodes`` (the graph's nodes before the layout pass, whose result ``graph`` holds) so that each
    attention chain whose scores do not fit runs as query tiles; whether any did."""
    tiled = False
    for chain in row_chains(graph):
        tiles = query_tiles(graph, chain, machine, cores)
        block = _block(graph, nodes, chain) if len(tiles) > 1 else None
        if block is None:
            continue
        parts = [_tile(block, start, stop, f"q{t}") for t, (start, stop) in enumerate(tiles)]
        tail = chain[-1]
        out = tail.outputs[0]
        cat = Node("cat", [p[-1].outputs[0] for p in parts], [out], tail.fx, {"along": len(out.shape) - 2},
                   name=f"{tail.name}_cat")
        at = nodes.index(tail)
        nodes[at:at + 1] = [*(n for p in parts for n in p), cat]
        for node in block[:-1]:
            nodes.remove(node)
        tiled = True
    return tiled


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


def _tile(block: list[Node], start: int, stop: int, tag: str, tiles: dict[Value, Value] | None = None) -> list[Node]:
    """The block over query rows ``start:stop``: each value a tile of its own (``tiles``: the block's values to
    their tiles), Q and a mask varying along the rows read through windows. A fused kernel's tile keeps its chain
    (``unfused``) tiled alike, over the same tiles of the values it reads and writes, so that a tile the lowering
    refuses runs its chain on the card (compile.py), as the untiled kernel would, not on the CPU."""
    tiles = {} if tiles is None else tiles
    out: list[Node] = []
    for node in block:
        inputs = []
        for i, v in enumerate(node.inputs):
            if v in tiles:
                inputs.append(tiles[v])
            elif _along_rows(node, i):
                window = _rows(v, start, stop, f"{node.name}_{tag}_in{i}")
                cut = ((len(v.shape) - 2, start, stop),)
                out.append(Node(RESTICKIFY, [v], [window], node.fx, {"slice": (cut, False)},
                                name=f"{node.name}_{tag}_window{i}"))
                inputs.append(window)
            else:
                inputs.append(v)
        value = node.outputs[0]
        tiles.setdefault(value, _rows(value, start, stop, f"{value.name}_{tag}"))  # a chain's last: its kernel's
        attrs = {"regroup": True} if node.host == "view" else dict(node.attrs)
        tile = Node(node.op, inputs, [tiles[value]], node.fx, attrs, node.host, node.reason, name=f"{node.name}_{tag}")
        tile.unfused = _tile(node.unfused, start, stop, tag, tiles)
        out.append(tile)
    return out


def _along_rows(node: Node, i: int) -> bool:
    """Whether the block's kernel ``node`` reads its input ``i`` (not a value of the block) by query rows: a
    matmul's A (the head's Q; B, Kᵀ or V, is read whole), or a pointwise operand not broadcast along the rows (a
    causal mask; not the scale, nor a key-padding mask of one row)."""
    v = node.inputs[i]
    return i == 0 if node.op == "batchmatmul" else len(v.shape) > 1 and v.shape[-2] > 1


def _rows(v: Value, start: int, stop: int, name: str) -> Value:
    """A value like ``v`` over rows ``start:stop`` of its second-to-last dim."""
    return Value(name, (*v.shape[:-2], stop - start, v.shape[-1]), v.dtype, carrier=v.carrier)
