"""Pass 4: each kernel's iteration space and its split over the cores.

Slices are exact divisors counted in whole sticks (the stick dim in sticks, the others in
elements), because the lowering gives every core an equal piece of whole sticks. Output dims
are split, outer dims first; a reduced dim never is (its partial results would need combining
across cores), nor the last dim of a row-wise kernel (softmax, the norms). A matmul's split
over batch, rows and columns is chosen by a cost estimate: the
larger of the DRAM time (each core reads its rows of A and its columns of B) and the PT time of
the busiest core. On a prefill matmul this prefers a split such as (8, 4) to (32, 1), which
makes every core read all of B: torch-spyre issue 2407 measures (8, 4, 1) 2-2.6x faster.
"""

from __future__ import annotations

import math

from spyre_emu.config import STICK_BYTES, Machine

from .graph import Graph, Node
from .layout import REDUCTIONS

ROWWISE = ("softmax", "layernorm", "rmsnorm")  # each row on one core: the last dim is not split
STICK = 64          # fp16 / bf16 elements per 128-byte stick
PT_ROWS = 8         # rows per PT pass
NEAR = 1.05         # matmul splits within 5 % of the cheapest estimate count as equal


def divide_work(graph: Graph, machine: Machine, cores: int) -> None:
    """Set ``dims`` and ``slices`` of every kernel for a card of ``cores`` cores."""
    for node in graph.nodes:
        if node.is_kernel:
            _divide(graph, node, machine, cores)


def dim_names(rank: int) -> list[str]:
    return [f"d{i}" for i in range(rank - 2)] + ["mb", "out"]


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _divide(graph: Graph, node: Node, machine: Machine, cores: int) -> None:
    shapes = [graph.tensors[name].dshape for name in node.tensors]
    if node.op == "batchmatmul":
        node.dims, node.slices = _matmul(shapes, machine, cores)
        return
    space = shapes[0] if node.op in REDUCTIONS else shapes[-1]
    names = dim_names(len(space))
    if node.op in REDUCTIONS:
        reduced = [i for i, (n, m) in enumerate(zip(shapes[0], shapes[-1], strict=True)) if n != m]
    else:
        reduced = [len(space) - 1] if node.op in ROWWISE else []
    units = [-(-n // STICK) if i == len(space) - 1 else n for i, n in enumerate(space)]
    node.dims = dict(zip(names, space, strict=True))
    node.slices = dict(zip(names, _greedy(units, [i not in reduced for i in range(len(units))], cores),
                           strict=True))


def _greedy(units: list[int], splittable: list[bool], cores: int) -> list[int]:
    """Outer dims first, each split by its largest divisor the cores still left allow."""
    out, left = [], cores
    for n, ok in zip(units, splittable, strict=True):
        g = max(d for d in divisors(n) if d <= left) if ok else 1
        out.append(g)
        left //= g
    return out


def _matmul(shapes: list[tuple[int, ...]], machine: Machine, cores: int) -> tuple[dict, dict]:
    a, b = shapes[0], shapes[1]
    batch = a[0] if len(a) == 3 else 1
    (m, k), n = a[-2:], b[-1]
    costs = {s: matmul_cost(batch, m, k, n, s, machine) for s in _matmul_splits(batch, m, n, cores)}
    near = [s for s, c in costs.items() if c <= NEAR * min(costs.values())]
    best = min(near, key=lambda s: (-math.prod(s), costs[s]))  # no idle cores for an estimated saving < 5 %
    dims = {"mb": m, "in": k, "out": n}
    slices = {"mb": best[1], "in": 1, "out": best[2]}
    if len(a) == 3:
        dims, slices = {"x": batch, **dims}, {"x": best[0], **slices}
    return dims, slices


def _matmul_splits(batch: int, m: int, n: int, cores: int) -> list[tuple[int, int, int]]:
    return [(x, r, c) for x in divisors(batch) if x <= cores for r in divisors(m) if x * r <= cores
            for c in divisors(-(-n // STICK)) if x * r * c <= cores]


def matmul_cost(batch: int, m: int, k: int, n: int, split: tuple[int, int, int], machine: Machine) -> float:
    """Estimated cycles of a matmul split (batch, rows, columns): the longest of the card's DRAM time,
    one core's own loads (a stick per cycle) and one core's PT time."""
    x, r, c = split
    k_pad, n_pad = -(-k // STICK) * STICK, -(-n // STICK) * STICK
    elems = batch * (c * m * k_pad + r * k_pad * n_pad + m * n_pad)  # A per column slice, B per row slice, C
    dram_cycles = 2 * elems / machine.dram.peak_bytes_per_cycle()
    core_cycles = 2 * elems / (x * r * c) / STICK_BYTES
    rows = -(-(m // r) // PT_ROWS) * PT_ROWS
    macs = (batch // x) * rows * (n_pad // c) * k_pad
    pt_cycles = macs / (machine.cores.corelets * machine.pt.macs_per_cycle("fp16"))
    return max(dram_cycles, core_cycles, pt_cycles)
