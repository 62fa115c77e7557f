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
    (each operand must step by one stick or stay on one)."""
    return _cuts(np.array([*operands, out]))


def _cuts(addrs: np.ndarray) -> list[tuple[int, int]]:
    """``segments`` of ``addrs``, one row per operand and the output's last. Worked out on the rows'
    steps all at once, then walked stretch by stretch: how far a stretch starting at each position can
    reach is known beforehand (the first change of step after it, ``_next``), so the cost is linear in
    the positions. Most calls are one stretch (every row steady throughout), found by one comparison: the
    lowering asks for tens of thousands of short ones, where numpy's cost per call is what counts."""
    n = addrs.shape[1]
    if n < 2:
        return [(0, n)] if n else []
    steps = addrs[:, 1:] - addrs[:, :-1]
    first = steps[:, 0].tolist()
    if first[-1] == STICK_BYTES and all(f in (0, STICK_BYTES) for f in first) and (steps == steps[:, :1]).all():
        return [(0, n)]
    changes = np.ones(steps.shape, bool)
    changes[:-1, :-1] = steps[:-1, 1:] != steps[:-1, :-1]  # an operand's step changes after this one
    changes[-1] = steps[-1] != STICK_BYTES                 # the output is not contiguous across this step
    last = _next(changes)
    steady = (steps[:-1] == 0) | (steps[:-1] == STICK_BYTES)
    reach = np.where(steady, last[:-1] + 1, np.arange(n - 1))  # an operand's last position from each one
    stop = (np.minimum(last[-1], reach.min(axis=0, initial=n)) + 1).tolist()
    cuts, s = [], 0
    while s < n - 1:
        cuts.append((s, stop[s]))
        s = stop[s]
    return cuts + [(s, n)] if s < n else cuts


def _next(flags: np.ndarray) -> np.ndarray:
    """For each row and index, the first index at or after it whose flag is set (the row's length where none is)."""
    width = flags.shape[-1]
    at = np.where(flags, np.arange(width), width)
    return np.minimum.accumulate(at[:, ::-1], axis=1)[:, ::-1]


def sfu_ops(op: str, operands: list[np.ndarray], out: np.ndarray, dtype: str,
            out_dtype: str | None = None, splat: tuple[int, ...] = ()) -> list[Item]:
    """``op`` over positions [0, len(out)): operand ``i`` of position ``p`` at ``operands[i][p]``;
    ``out_dtype`` for a cast, whose output type is not its operands'; the operands in ``splat`` are
    read with lane 0 splatted to every lane (a value broadcast along the stick). Each stretch's first
    and last addresses are taken out as Python ints all at once (numpy's scalars are slow to index)."""
    addrs = np.array([*operands, out])
    cuts = _cuts(addrs)
    if len(cuts) == 1:
        starts, ends = [addrs[:, 0].tolist()], [addrs[:, -1].tolist()]
    else:
        starts, ends = addrs[:, [s for s, _ in cuts]].T.tolist(), addrs[:, [e - 1 for _, e in cuts]].T.tolist()
    fields = list(zip(SFU_OPERANDS, range(len(operands)), strict=False))
    items = []
    for (s, e), at, end in zip(cuts, starts, ends, strict=True):
        item: Item = {"op": op}
        for field, i in fields:
            item[field] = at[i]
            if e - s > 1 and end[i] == at[i]:
                item[f"{field}_broadcast"] = True
            if i in splat:
                item[f"{field}_splat"] = True
        item |= {"out": at[-1], "sticks": e - s}
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
