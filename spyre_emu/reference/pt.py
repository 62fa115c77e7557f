"""PT array: a matmul pass takes a fixed number of cycles ([pt]; docs/unit-program.md).

The array is always fed ``rows_per_pass`` rows (fewer are padded), so a pass costs
fill + streaming + drain, where streaming is bounded by the MAC rate or by reading B,
one stick per cycle. The PT reads LX without port contention.
"""

from __future__ import annotations

from ..config import DTYPE_BYTES, STICK_BYTES, Machine


def pass_cycles(machine: Machine, k: int, dtype: str) -> int:
    pt = machine.pt
    macs = pt.rows_per_pass * k * pt.cols_per_pass
    mac_cycles = -(-macs // (pt.pe_rows * pt.pe_cols * pt.lanes[dtype]))
    b_sticks = -(-(k * pt.cols_per_pass * DTYPE_BYTES[dtype]) // STICK_BYTES)
    return pt.fill_cycles + max(mac_cycles, b_sticks) + pt.drain_cycles
