"""PT array: a matmul pass takes a fixed number of cycles ([pt]; docs/unit-program.md).

Spyre mode: the array is always fed ``rows_per_pass`` rows and ``cols_per_pass`` columns
(fewer are padded), so a pass costs fill + streaming + drain, where streaming is bounded
by the MAC rate or by reading B, one stick per cycle. The PT reads LX without port
contention. Plain mode: the pass is a GEMM on a textbook array, timed as SCALE-Sim v3
counts it (docs/decisions/plain-systolic.md).
"""

from __future__ import annotations

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..config.machine import PtArray


def pass_cycles(machine: Machine, rows: int, cols: int, k: int, dtype: str) -> int:
    pt = machine.pt
    if pt.mode == "plain":
        return _plain_cycles(pt, rows, cols, k)
    macs = pt.rows_per_pass * k * pt.cols_per_pass
    mac_cycles = -(-macs // (pt.pe_rows * pt.pe_cols * pt.lanes[dtype]))
    b_sticks = -(-(k * pt.cols_per_pass * DTYPE_BYTES[dtype]) // STICK_BYTES)
    return pt.fill_cycles + max(mac_cycles, b_sticks) + pt.drain_cycles


def _plain_cycles(pt: PtArray, m: int, n: int, k: int) -> int:
    """(m x k) @ (k x n): two dims sit on the array's rows and columns, the third streams
    through; each fold of the array loads its stationary operand (ws, is), then takes
    rows + columns - 2 cycles of skew plus the streamed length. SCALE-Sim reports the
    index of the last cycle, hence the final - 1."""
    on_rows, on_cols, streamed = {"os": (m, n, k), "ws": (k, n, m), "is": (k, m, n)}[pt.dataflow]
    preload = 0 if pt.dataflow == "os" else pt.pe_rows
    folds = -(-on_rows // pt.pe_rows) * -(-on_cols // pt.pe_cols)
    return folds * (preload + pt.pe_rows + pt.pe_cols + streamed - 2) - 1
