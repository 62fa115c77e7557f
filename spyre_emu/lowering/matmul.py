"""Matmul kernels (``batchmatmul``): PT passes of 8 rows on both corelets.

Operands are A (M, K), B (K, N), C (M, N), each optionally with a leading batch dim, in
torch-spyre's default layouts (2-D A is [K sticks][M][64]: a K stick of consecutive rows is
contiguous). A core owns an (M block, N block) of C per batch and streams K in chunks: per
chunk it loads, for each K stick, its rows of A and, per 64-column group, the chunk's rows of
B, as runs of consecutive device sticks (one run each in 2-D); both are double buffered
(chunk q + 2 waits until every pass of chunk q is done). Each pass multiplies up to 8 rows
of the A tile by one column group and accumulates into C in LX; the passes alternate between
the two corelets' PT arrays. C is stored once, after the last chunk. Padding sticks are
zero in A and B, so K is processed in whole sticks.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, TensorLayout, default_layout
from ..kernel_program.model import Kernel
from .placement import Runs, as_runs, check_division, division, slice_index, stick_of
from .streams import CoreStreams, Emit
from .target import Stepper, Target


def tile_chunk(k_sticks: int, rows: int, groups: int, lx_sticks: int) -> int:
    """The largest K chunk (in A sticks) whose two A and B tile sets fit beside the C tile.

    One A stick holds 64 K values of a row; the same 64 K values of B are 64 sticks per group.
    """
    free = lx_sticks - groups * rows
    per_stick = 2 * (rows + 64 * groups)
    if free < per_stick:
        return 0
    return min(k_sticks, free // per_stick)


@dataclass(frozen=True)
class Operands:
    """Names and layouts of A, B, C, and the batch a core works on (None for 2-D)."""

    names: tuple[str, str, str]
    layouts: tuple[TensorLayout, TensorLayout, TensorLayout]
    batch: int | None

    def _runs(self, which: int, rows: np.ndarray, col: int) -> Runs:
        """Sticks holding host rows ``rows`` at column ``col`` of operand ``which``, in row order."""
        lead = [np.full(rows.size, self.batch)] if self.batch is not None else []
        host = np.array([*lead, rows, np.full(rows.size, col)], np.int64)
        return as_runs(stick_of(self.layouts[which], host))

    def a(self, k_stick: int, m0: int, rows: int) -> Runs:
        return self._runs(0, np.arange(m0, m0 + rows), k_stick * 64)

    def b(self, group: int, k0: int, count: int) -> Runs:
        return self._runs(1, np.arange(k0, k0 + count), group * 64)

    def c(self, group: int, m0: int, rows: int) -> Runs:
        return self._runs(2, np.arange(m0, m0 + rows), group * 64)


def lower_matmul(core: CoreStreams, *, operands: list[Operands], k: int, m_block: tuple[int, int],
                 n_groups: tuple[int, int], block: int, lx_sticks: int, rows_per_pass: int, step: Stepper) -> None:
    """Append one core's share: per batch in ``operands``, rows [m0, m0 + rows) of C and column
    groups [g0, g0 + groups), ``block`` groups at a time, each after the previous is stored."""
    (m0, rows), (g0, groups) = m_block, n_groups
    tag, done = core.tag, 0
    for ops in operands:
        for first in range(g0, g0 + groups, block):
            size = min(block, g0 + groups - first)
            core.tag = f"{tag}n{done}."
            chunk = step(-(-k // 64), tile_chunk(-(-k // 64), rows, size, lx_sticks))
            _column_block(core, ops, k, (m0, rows), (first, size), chunk, rows_per_pass,
                          after=f"{tag}n{done - 1}.stored" if done else None)
            done += 1
    core.tag = tag


def _column_block(core: CoreStreams, ops: Operands, k: int, m_block: tuple[int, int], n_groups: tuple[int, int],
                  chunk: int, rows_per_pass: int, after: str | None) -> None:
    a_name, b_name, c_name = ops.names
    (m0, rows), (g0, groups) = m_block, n_groups
    tag, k_sticks = core.tag, -(-k // 64)
    a_bytes, b_bytes = chunk * rows * STICK_BYTES, groups * chunk * 64 * STICK_BYTES
    sets = [(0, a_bytes), (a_bytes + b_bytes, 2 * a_bytes + b_bytes)]
    c_lx = 2 * (a_bytes + b_bytes)
    starts = list(range(0, k_sticks, chunk))
    passes = [(g, r) for g in range(groups) for r in range(0, rows, rows_per_pass)]
    units = [(u, mine) for u, mine in (("pt0", passes[0::2]), ("pt1", passes[1::2])) if mine]
    for q, s0 in enumerate(starts):
        b, n_k = q % 2, min(chunk, k_sticks - s0)
        k_rows = min(n_k * 64, k - s0 * 64)  # B has exactly K rows; A's last stick is padded
        a_lx, b_lx = sets[b]
        loads = [item for s in range(n_k)
                 for item in core.dma("load", a_name, ops.a(s0 + s, m0, rows), a_lx + s * rows * STICK_BYTES)]
        loads += [item for g in range(groups)
                  for item in core.dma("load", b_name, ops.b(g0 + g, s0 * 64, k_rows),
                                       b_lx + g * chunk * 64 * STICK_BYTES)]
        if q >= 2:
            loads[0]["wait"] = [f"{tag}free{b}_{u}" for u, _ in units]
        if q == 0 and after:
            loads[0]["wait"] = [after]
        loads[-1]["signal"] = [f"{tag}ready{b}_{u}" for u, _ in units]
        last = q == len(starts) - 1
        for unit, mine in units:
            for i, (g, r) in enumerate(mine):
                item = core.add(unit, {"op": "matmul", "a": a_lx + r * STICK_BYTES, "a_k_stride": rows,
                                       "a_row_stride": 1, "b": b_lx + g * chunk * 64 * STICK_BYTES,
                                       "c": c_lx + (g * rows + r) * STICK_BYTES, "k": k_rows,
                                       "rows": min(rows_per_pass, rows - r), "accumulate": q > 0})
                if i == 0:
                    item["wait"] = [f"{tag}ready{b}_{unit}"]
                if i == len(mine) - 1 and (last or q + 2 < len(starts)):
                    item["signal"] = [f"{tag}done_{unit}" if last else f"{tag}free{b}_{unit}"]
    stores = [item for g in range(groups)
              for item in core.dma("store", c_name, ops.c(g0 + g, m0, rows), c_lx + g * rows * STICK_BYTES)]
    stores[0]["wait"] = [f"{tag}done_{u}" for u, _ in units]
    stores[-1]["signal"] = [f"{tag}stored"]


def plan_matmul(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a matmul kernel and return each core's share of it."""
    src, where, machine, lx_sticks = target.program.source, kernel.path, target.machine, target.budget
    a, b, c = (t.layout for t in tensors)
    batched = len(a.shape) == 3
    if not all(len(t.shape) == len(a.shape) in (2, 3) and t.dtype in ("fp16", "bf16")
               and t == default_layout(t.shape, t.dtype) for t in (a, b, c)):
        raise ProgramError("matmul lowers 2-D or batched 3-D fp16/bf16 operands in the default layout so far",
                           src, where)
    (m, k), n = a.shape[-2:], b.shape[-1]
    want = {"mb": m, "in": k, "out": n, **({"x": a.shape[0]} if batched else {})}
    lead = a.shape[:-2]
    if b.shape != (*lead, k, n) or c.shape != (*lead, m, n) or kernel.dims != want:
        raise ProgramError(f"expected A ([X,] M, K) @ B ([X,] K, N) -> C ([X,] M, N) with dims [x=X,] mb=M, in=K, "
                           f"out=N; got A {list(a.shape)}, B {list(b.shape)}, C {list(c.shape)}, dims {kernel.dims}",
                           src, where + ".dims")
    if kernel.slices["in"] != 1:
        raise ProgramError("splitting the reduced dim 'in' over cores is not lowered yet", src,
                           where + ".work_division.in")
    dims = (["x"] if batched else []) + ["mb", "out"]
    div = division(kernel, dims)
    check_division(c, div, src, where + ".work_division")
    units = {"x": a.shape[0] if batched else 1, "mb": m, "out": -(-n // 64)}  # batches, rows, column groups
    bounds = {d: div.bounds(dims.index(d), units[d]) if d in dims else np.array([0, 1]) for d in units}
    most = {d: int(np.diff(b).max()) for d, b in bounds.items()}
    block = column_block(-(-k // 64), most["mb"], most["out"], lx_sticks)
    if block == 0:
        raise ProgramError(f"a core's {most['mb']} rows of C leave no LX for A and B; split mb over more cores", src,
                           where + ".work_division")
    names = (kernel.inputs[0], kernel.inputs[1], kernel.outputs[0])
    shares = {}
    for core in range(kernel.cores):
        index = slice_index(kernel.slices, core)
        (x0, x1), (m0, m1), (g0, g1) = ((int(bounds[d][index.get(d, 0)]), int(bounds[d][index.get(d, 0) + 1]))
                                        for d in ("x", "mb", "out"))
        if x1 == x0 or m1 == m0 or g1 == g0:
            continue
        batches = list(range(x0, x1)) if batched else [None]
        shares[core] = partial(lower_matmul, operands=[Operands(names, (a, b, c), x) for x in batches], k=k,
                               m_block=(m0, m1 - m0), n_groups=(g0, g1 - g0), block=block, lx_sticks=lx_sticks,
                               rows_per_pass=machine.pt.rows_per_pass, step=target.stepper(kernel))
    return shares


def column_block(k_sticks: int, rows: int, groups: int, lx_sticks: int) -> int:
    """Column groups a core computes at a time: all of them if a K chunk of 8 sticks still fits."""
    fits = [g for g in range(1, groups + 1) if tile_chunk(k_sticks, rows, g, lx_sticks) >= min(8, k_sticks)]
    return fits[-1] if fits else 0
