"""Matmul kernels (``batchmatmul`` on 2-D operands): PT passes of 8 rows on both corelets.

Operands keep torch-spyre's default layouts: A (M, K) as [K sticks][M][64], B (K, N) as
[N sticks][K][64], C (M, N) as [N sticks][M][64]. A core owns an (M block, N block) of C and
streams K in chunks: per chunk it loads, for each K stick, its rows of A (contiguous in the
device layout) and, per 64-column group, the chunk's rows of B; both are double buffered
(chunk q + 2 waits until every pass of chunk q is done). Each pass multiplies up to 8 rows
of the A tile by one column group and accumulates into C in LX; the passes alternate between
the two corelets' PT arrays. C is stored once, after the last chunk. Padding sticks are
zero in A and B, so K is processed in whole sticks.
"""

from __future__ import annotations

from ..config import STICK_BYTES
from .streams import CoreStreams


def tile_chunk(k_sticks: int, rows: int, groups: int, lx_sticks: int) -> int:
    """The largest K chunk (in A sticks) whose two A and B tile sets fit beside the C tile.

    One A stick holds 64 K values of a row; the same 64 K values of B are 64 sticks per group.
    """
    free = lx_sticks - groups * rows
    per_stick = 2 * (rows + 64 * groups)
    if free < per_stick:
        return 0
    return min(k_sticks, free // per_stick)


def lower_matmul(core: CoreStreams, *, names: tuple[str, str, str], m: int, k: int, m_block: tuple[int, int],
                 n_groups: tuple[int, int], block: int, lx_sticks: int, rows_per_pass: int) -> None:
    """Append one core's share: rows [m0, m0 + rows) of C, column groups [g0, g0 + groups),
    ``block`` groups at a time; each block waits until the previous one is stored."""
    (m0, rows), (g0, groups) = m_block, n_groups
    tag = core.tag
    for i, first in enumerate(range(g0, g0 + groups, block)):
        size = min(block, g0 + groups - first)
        core.tag = f"{tag}n{i}."
        chunk = tile_chunk(-(-k // 64), rows, size, lx_sticks)
        _column_block(core, names, m, k, (m0, rows), (first, size), chunk, rows_per_pass,
                      after=f"{tag}n{i - 1}.stored" if i else None)
    core.tag = tag


def _column_block(core: CoreStreams, names: tuple[str, str, str], m: int, k: int, m_block: tuple[int, int],
                  n_groups: tuple[int, int], chunk: int, rows_per_pass: int, after: str | None) -> None:
    a_name, b_name, c_name = names
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
        loads = [core.add("load", {"op": "load", "dram": f"{a_name}+{((s0 + s) * m + m0) * STICK_BYTES}",
                                   "lx": a_lx + s * rows * STICK_BYTES, "bytes": rows * STICK_BYTES})
                 for s in range(n_k)]
        loads += [core.add("load", {"op": "load", "dram": f"{b_name}+{((g0 + g) * k + s0 * 64) * STICK_BYTES}",
                                    "lx": b_lx + g * chunk * 64 * STICK_BYTES, "bytes": k_rows * STICK_BYTES})
                  for g in range(groups)]
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
    for g in range(groups):
        store = core.add("store", {"op": "store", "lx": c_lx + g * rows * STICK_BYTES,
                                   "dram": f"{c_name}+{((g0 + g) * m + m0) * STICK_BYTES}",
                                   "bytes": rows * STICK_BYTES})
        if g == 0:
            store["wait"] = [f"{tag}done_{u}" for u, _ in units]
    store["signal"] = [f"{tag}stored"]
