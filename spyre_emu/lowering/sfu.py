"""SFU ops over address sequences: one op per stretch where every operand is contiguous or one stick.

A family computes, for each output stick of a chunk, the LX address of every operand (a loaded
chunk buffer, a broadcast stick, an LX-resident tensor); this module turns those sequences into
the fewest SFU instructions, marking an operand that stays on one stick as ``*_broadcast``.
"""

from __future__ import annotations

import numpy as np

from ..config import STICK_BYTES
from ..unit_program.opcodes import SFU_OPERANDS
from .streams import Item


def segments(operands: list[np.ndarray], out: np.ndarray) -> list[tuple[int, int]]:
    """Cut positions [0, n) where the output stops being contiguous or an operand changes its step
    (each operand must step by one stick or stay on one). Each stretch is found from where the steps
    next change (``_next``), so the cost is linear in n however many stretches there are."""
    n = len(out)
    if n < 2:
        return [(0, n)] if n else []
    out_end = _next(np.diff(out) != STICK_BYTES)
    steps = [np.diff(addr) for addr in operands]
    runs = [(_next(np.append(d[1:] != d[:-1], True)) + 1, (d == 0) | (d == STICK_BYTES)) for d in steps]
    cuts, s = [], 0
    while s < n - 1:
        q = out_end[s]
        for run_end, steady in runs:
            q = min(q, run_end[s]) if steady[s] else s
        e = min(int(q) + 1, n)
        cuts.append((s, e))
        s = e
    return cuts + [(s, n)] if s < n else cuts


def _next(flags: np.ndarray) -> np.ndarray:
    """For each index, the first index at or after it whose flag is set (len(flags) where none is)."""
    at = np.where(flags, np.arange(len(flags)), len(flags))
    return np.minimum.accumulate(at[::-1])[::-1]


def sfu_ops(op: str, operands: list[np.ndarray], out: np.ndarray, dtype: str,
            out_dtype: str | None = None, splat: tuple[int, ...] = ()) -> list[Item]:
    """``op`` over positions [0, len(out)): operand ``i`` of position ``p`` at ``operands[i][p]``;
    ``out_dtype`` for a cast, whose output type is not its operands'; the operands in ``splat`` are
    read with lane 0 splatted to every lane (a value broadcast along the stick)."""
    items = []
    for s, e in segments(operands, out):
        item: Item = {"op": op}
        for i, (field, addr) in enumerate(zip(SFU_OPERANDS, operands, strict=False)):
            item[field] = int(addr[s])
            if e - s > 1 and addr[e - 1] == addr[s]:
                item[f"{field}_broadcast"] = True
            if i in splat:
                item[f"{field}_splat"] = True
        item |= {"out": int(out[s]), "sticks": e - s}
        if dtype != "fp16":
            item["dtype"] = dtype
        if out_dtype is not None:
            item["out_dtype"] = out_dtype
        items.append(item)
    return items


def stick_addrs(base: int, n: int) -> np.ndarray:
    """Addresses of ``n`` consecutive sticks from ``base``."""
    return base + np.arange(n, dtype=np.int64) * STICK_BYTES


def fold(step: str, srcs: list[np.ndarray], dst: np.ndarray, dtype: str) -> list[Item]:
    """``dst`` = srcs[0] step srcs[1] step ... stick by stick (a copy of srcs[0] when alone)."""
    if len(srcs) == 1:
        return sfu_ops("copy", srcs, dst, dtype)
    ops = sfu_ops(step, srcs[:2], dst, dtype)
    for src in srcs[2:]:
        ops += sfu_ops(step, [dst, src], dst, dtype)
    return ops


def masked(src: np.ndarray, pad: np.ndarray, mask: int, fill: int, dtype: str) -> list[Item]:
    """``pad`` = ``src`` with its padding lanes replaced by the fill stick at ``fill`` (``where`` with
    the lane mask stick at ``mask``): padding holds whatever earlier kernels wrote there."""
    return sfu_ops("where", [np.full_like(pad, mask), src, np.full_like(pad, fill)], pad, dtype)
