"""Reductions along the stick dim (``sum``, ``mean``, ``max``, ``min`` with keepdim).

For each output row (every host index but the reduced, last dim), the input row's K sticks
are combined stick by stick on the SFU (add, max), then across the 64 lanes (lanes_sum,
lanes_max), giving one output stick per row. ``mean`` then multiplies by a constant stick
of 1/n; ``min`` is -max(-x). Per core: chunks of its rows; for each K stick the chunk's rows
are contiguous in the default layout (K sticks outside the rows), so one load per K stick.
Two buffer sets alternate as in pointwise; the two corelets each take half the rows.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor, default_layout, dim_map, elems_per_stick
from ..kernel_program.model import Kernel
from .placement import Runs, as_runs, check_division, owner_of, stick_hosts, stick_of
from .pointwise import chunks
from .streams import CoreStreams, Emit
from .target import Target

COMBINE = {"sum": ("add", "lanes_sum"), "mean": ("add", "lanes_sum"), "max": ("max", "lanes_max"),
           "min": ("max", "lanes_max")}


def lower_reduction(core: CoreStreams, *, op: str, x: str, y: str, x_sticks: np.ndarray, y_runs: Runs,
                    scale: str | None, lx_sticks: int) -> None:
    """Reduce along the stick dim. ``x_sticks[s, j]`` is the input stick at K stick ``s`` of the
    core's ``j``-th output stick (in the order of ``y_runs``)."""
    k = len(x_sticks)
    chunk = (lx_sticks - 1) // (2 * (k + 2))
    step, lanes = COMBINE[op]
    base = [b * (k + 2) * chunk * STICK_BYTES + STICK_BYTES for b in range(2)]  # stick 0: the scale
    if scale:
        core.add("load", {"op": "load", "dram": scale, "lx": 0, "bytes": STICK_BYTES})
    done_rows = 0
    pieces = chunks(y_runs, chunk)
    for q, piece in enumerate(pieces):
        n, b = sum(c for _, c in piece), q % 2
        x_lx, acc, out = base[b], base[b] + k * chunk * STICK_BYTES, base[b] + (k + 1) * chunk * STICK_BYTES
        loads = [item for s in range(k) for item in
                 core.dma("load", x, as_runs(x_sticks[s, done_rows:done_rows + n]), x_lx + s * chunk * STICK_BYTES)]
        halves = [(0, -(-n // 2)), (-(-n // 2), n)]
        sfu_ops = {f"sfu{i}": _row_ops(op, step, lanes, k, chunk, x_lx, acc, out, lo, hi - lo, scale is not None)
                   for i, (lo, hi) in enumerate(halves) if hi > lo}
        core.wire_chunk(q, loads, sfu_ops, core.dma("store", y, piece, out))
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


def lower_reduction_across(core: CoreStreams, *, op: str, x: str, y: str, x_sticks: np.ndarray, y_runs: Runs,
                           scale: str | None, lx_sticks: int) -> None:
    """Reduce over a dim outside the stick: the sticks to combine are lane-aligned, so each output
    stick is one SFU reduction (reduce_sum / reduce_max) over its input sticks, loaded side by side.
    ``x_sticks[i, j]`` is the input stick at position ``i`` of the core's ``j``-th output stick."""
    positions = x_sticks.shape[0]
    chunk = max(1, (lx_sticks - 1) // (2 * (positions + 1)))
    reduce = "reduce_max" if op in ("max", "min") else "reduce_sum"
    if scale:
        core.add("load", {"op": "load", "dram": scale, "lx": 0, "bytes": STICK_BYTES})
    base = [STICK_BYTES + b * (positions + 1) * chunk * STICK_BYTES for b in range(2)]
    pieces = chunks(y_runs, chunk)
    done = 0
    for q, piece in enumerate(pieces):
        n, b = sum(c for _, c in piece), q % 2
        out = base[b] + positions * chunk * STICK_BYTES
        loads = [item for j in range(n) for item in core.dma("load", x, as_runs(x_sticks[:, done + j]),
                                                             base[b] + j * positions * STICK_BYTES)]
        users = [0, 1] if n > 1 else [0]
        sfu_ops = {f"sfu{i}": [item for j in range(i, n, len(users))
                       for item in _across_ops(op, reduce, base[b] + j * positions * STICK_BYTES,
                                               out + j * STICK_BYTES, positions, scale is not None)]
                   for i in users}
        core.wire_chunk(q, loads, sfu_ops, core.dma("store", y, piece, out))
        done += n


def _across_ops(op: str, reduce: str, src: int, dst: int, positions: int, scaled: bool) -> list[dict]:
    """SFU ops turning one output stick's lane-aligned input sticks at ``src`` into ``dst``."""
    ops = [{"op": "neg", "a": src, "out": src, "sticks": positions}] if op == "min" else []
    ops.append({"op": reduce, "a": src, "out": dst, "sticks": positions})
    if op == "min":
        ops.append({"op": "neg", "a": dst, "out": dst, "sticks": 1})
    if scaled:
        ops.append({"op": "mul", "a": dst, "b": 0, "b_broadcast": True, "out": dst, "sticks": 1})
    return ops


def plan_reduction(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a reduction kernel (one reduced dim, keepdim) and return each core's share of it."""
    src, where, lx_sticks = target.program.source, kernel.path, target.budget
    x, y = (t.layout for t in tensors)
    reduced = [d for d, (n, m) in enumerate(zip(x.shape, y.shape, strict=False)) if n != m]
    if x != default_layout(x.shape, x.dtype) or y != default_layout(y.shape, y.dtype) or x.dtype != y.dtype \
            or len(x.shape) != len(y.shape) or len(reduced) != 1 or y.shape[reduced[0]] != 1:
        raise ProgramError("reductions lower over one dim, kept as size 1, in default layouts so far: output "
                           f"shape {list(y.shape)} for input {list(x.shape)}", src, where + ".outputs")
    if list(kernel.dims.values()) != list(x.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the input shape {list(x.shape)}", src,
                           where + ".dims")
    dim, slices = reduced[0], list(kernel.slices.values())
    if slices[dim] != 1:
        raise ProgramError("splitting the reduced dim over cores is not lowered yet", src, where + ".work_division")
    along_stick = dim == dim_map(x)[-1]
    if along_stick and kernel.op in ("max", "min") and x.shape[dim] % elems_per_stick(x.dtype):
        raise ProgramError(f"{kernel.op} over a padded stick is not lowered yet", src, where + ".op")
    check_division(x, slices, src, where + ".work_division")
    host, valid = stick_hosts(y)
    owner = owner_of(y, host, slices)
    step = elems_per_stick(x.dtype) if along_stick else 1
    positions = -(-x.shape[dim] // step)
    scale = f"{scale_buffer(kernel)}+0" if kernel.op == "mean" else None
    shares = {}
    for core in range(kernel.cores):
        ids = np.flatnonzero(valid & (owner == core))
        if not ids.size:
            continue
        at = host[:, ids].copy()
        x_sticks = []
        for i in range(positions):
            at[dim] = i * step
            x_sticks.append(stick_of(x, at))
        lower = lower_reduction if along_stick else lower_reduction_across
        shares[core] = partial(lower, op=kernel.op, x=kernel.inputs[0], y=kernel.outputs[0],
                               x_sticks=np.array(x_sticks), y_runs=as_runs(ids), scale=scale, lx_sticks=lx_sticks)
    return shares


def scale_buffer(kernel: Kernel) -> str:
    return f"{kernel.name}_scale"


def constants(program: KernelProgram) -> dict[str, dict[str, Any]]:
    """DRAM buffers the reductions need besides the program's tensors: a stick of 1/n per mean."""
    out = {}
    for kernel in program.kernels:
        if kernel.op == "mean":
            x = program.tensors[kernel.inputs[0]].layout
            y = program.tensors[kernel.outputs[0]].layout
            n = math.prod(x.shape) // math.prod(y.shape)  # elements folded into each output element
            out[scale_buffer(kernel)] = {"bytes": STICK_BYTES, "dtype": x.dtype, "fill": 1.0 / n}
    return out
