"""Reductions along the stick dim (``sum``, ``mean``, ``max``, ``min`` with keepdim).

For each output row (every host index but the reduced, last dim), the input row's K sticks
are combined stick by stick on the SFU (add, max), then across the 64 lanes (lanes_sum,
lanes_max), giving one output stick per row. ``mean`` then multiplies by a constant stick
of 1/n; ``min`` is -max(-x). Per core: chunks of its rows; for each K stick the chunk's rows
are contiguous in the default layout (K sticks outside the rows), so one load per K stick.
Two buffer sets alternate as in pointwise; the two corelets each take half the rows.
"""

from __future__ import annotations

from ..config import STICK_BYTES
from .placement import Runs
from .pointwise import chunks
from .streams import CoreStreams

COMBINE = {"sum": ("add", "lanes_sum"), "mean": ("add", "lanes_sum"), "max": ("max", "lanes_max"),
           "min": ("max", "lanes_max")}


def lower_reduction(core: CoreStreams, *, op: str, x: str, y: str, x_sticks: list[Runs], y_runs: Runs,
                    scale: str | None, lx_sticks: int) -> None:
    """``x_sticks[s]`` are the runs of K stick ``s`` for this core's rows, in the order of ``y_runs``."""
    k = len(x_sticks)
    chunk = (lx_sticks - 1) // (2 * (k + 2))
    step, lanes = COMBINE[op]
    base = [b * (k + 2) * chunk * STICK_BYTES + STICK_BYTES for b in range(2)]  # stick 0: the scale
    if scale:
        core.add("load", {"op": "load", "dram": scale, "lx": 0, "bytes": STICK_BYTES})
    done_rows = 0
    pieces = chunks(y_runs, chunk)
    for q, piece in enumerate(pieces):
        n, b, tag = sum(c for _, c in piece), q % 2, core.tag
        x_lx, acc, out = base[b], base[b] + k * chunk * STICK_BYTES, base[b] + (k + 1) * chunk * STICK_BYTES
        loads = [core.dma("load", x, _slice_runs(x_sticks[s], done_rows, n), x_lx + s * chunk * STICK_BYTES)
                 for s in range(k)]
        flat = [item for group in loads for item in group]
        if q >= 2:
            flat[0]["wait"] = [f"{tag}free{b}"]
        halves = [(0, -(-n // 2)), (-(-n // 2), n)]
        users = [i for i, (lo, hi) in enumerate(halves) if hi > lo]
        flat[-1]["signal"] = [f"{tag}in{b}_sfu{i}" for i in users]
        for i in users:
            lo, hi = halves[i]
            ops = _row_ops(op, step, lanes, k, chunk, x_lx, acc, out, lo, hi - lo, scale is not None)
            ops[0]["wait"], ops[-1]["signal"] = [f"{tag}in{b}_sfu{i}"], [f"{tag}out{b}_sfu{i}"]
            for item in ops:
                core.add(f"sfu{i}", item)
        stores = core.dma("store", y, piece, out)
        stores[0]["wait"] = [f"{tag}out{b}_sfu{i}" for i in users]
        if q + 2 < len(pieces):
            stores[-1]["signal"] = [f"{tag}free{b}"]
        done_rows += n


def _row_ops(op: str, step: str, lanes: str, k: int, chunk: int, x_lx: int, acc: int, out: int, lo: int,
             n: int, scaled: bool) -> list[dict]:
    """SFU ops reducing rows [lo, lo + n) of a chunk: across K sticks, then across lanes."""
    def at(base: int) -> int:
        return base + lo * STICK_BYTES

    def stick(s: int) -> int:
        return at(x_lx + s * chunk * STICK_BYTES)

    ops: list[dict] = []
    if op == "min":  # min(x) = -max(-x): negate every stick in place first
        ops += [{"op": "neg", "a": stick(s), "out": stick(s), "sticks": n} for s in range(k)]
    first = {"op": step, "a": stick(0), "b": stick(1), "out": at(acc), "sticks": n} if k > 1 else \
        {"op": "copy", "a": stick(0), "out": at(acc), "sticks": n}
    ops.append(first)
    ops += [{"op": step, "a": at(acc), "b": stick(s), "out": at(acc), "sticks": n} for s in range(2, k)]
    ops.append({"op": lanes, "a": at(acc), "out": at(out), "sticks": n})
    if op == "min":
        ops.append({"op": "neg", "a": at(out), "out": at(out), "sticks": n})
    if scaled:
        ops.append({"op": "mul", "a": at(out), "b": 0, "b_broadcast": True, "out": at(out), "sticks": n})
    return ops


def _slice_runs(runs: Runs, skip: int, count: int) -> Runs:
    """Sticks [skip, skip + count) of a list of runs, as runs."""
    out: Runs = []
    for start, n in runs:
        lo, hi = max(skip, 0), min(skip + count, n)
        if hi > lo:
            out.append((start + lo, hi - lo))
        skip -= n
    return out
