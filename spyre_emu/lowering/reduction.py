"""Reductions (``sum``, ``mean``, ``max``, ``min``) over one dim, which the output keeps as size 1.

Along the stick dim, each output row's input sticks are combined stick by stick on the SFU
(add, max, min), then across the lanes (lanes_sum, lanes_max; min as -max(-x) of the combined
stick). Padding lanes hold whatever earlier kernels wrote there, so the last stick's are first
replaced by the op's identity (``where`` with a lane mask). Over a dim outside the stick, an
output stick's input sticks are lane-aligned: one reduce_sum/reduce_max over them side by side.

When the work division splits the reduced dim, every core of a group reduces its share to one
partial stick per output stick and sends it over the ring to the group's first core (the home),
which combines the partials, finishes (lanes, scale) and writes the output. ``mean`` multiplies
by a constant stick of 1/n at the end. Inputs and outputs may live in DRAM or in LX.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor, default_layout, dim_map, elems_per_stick
from ..kernel_program.model import Kernel
from .lx import Resident
from .placement import as_runs, check_division, division, owner_of, stick_hosts, stick_of
from .sfu import fold, masked, sfu_ops, stick_addrs
from .streams import CoreStreams, Emit, Item, chunks, halves
from .target import Stepper, Target

SCALE, MASK, FILL = 0, STICK_BYTES, 2 * STICK_BYTES  # the constant sticks at LX 0 of a reducing core
CONSTANTS = 3
LOWEST = {"fp16": -65504.0, "bf16": -3.38e38, "fp32": -3.4e38}  # max's identity as a finite number (else int8's)
STEP = {"sum": "add", "mean": "add", "max": "max", "min": "min"}  # combines partials along the stick


@dataclass(frozen=True)
class Share:
    """One core's part of a reduction: its positions along the reduced dim for its group's output
    sticks, and where its partials go."""

    kernel: str
    op: str
    along: bool                  # along the stick dim (else across sticks)
    x: str
    y: str
    x_home: Resident | None      # where x lives in LX (else DRAM)
    y_home: Resident | None
    x_ids: np.ndarray            # [positions, output sticks]: the input stick at each position
    y_ids: np.ndarray            # the group's output sticks (ascending)
    masked: bool                 # the last position is a padded stick
    member: int                  # index in the group; 0 is the home, which finishes
    home: int
    group: int                   # cores in the group
    constants: str | None        # the buffer of constant sticks, when the kernel needs one
    dtype: str
    where: tuple[str, str]

    @property
    def room(self) -> int:
        """Chunk-sized LX regions per buffer set: positions, acc, out, pad, one per other member."""
        return len(self.x_ids) + 3 + self.group - 1


def lower_reduction(core: CoreStreams, share: Share, budget: int, step: Stepper, stream: int) -> None:
    """``stream``: sticks per group of loads (positions along the stick, output sticks across) whose arrival lets
    the SFUs reduce them (what a DMA unit keeps in flight), so a step's work follows its loads instead of waiting
    for the last of them."""
    positions = len(share.x_ids)
    # across sticks from DRAM, an output stick's positions load and reduce in pieces of what a DMA unit keeps in
    # flight, so its SFU follows the loads (one output stick a core otherwise waits for all of them)
    seg = positions if share.along or share.x_home else min(positions, stream)
    chunk = step(len(share.y_ids), (budget - CONSTANTS) // (2 * share.room))
    consts = core.dma("load", share.constants, [(0, CONSTANTS)], 0) if share.constants else []
    pieces = chunks(as_runs(share.y_ids), chunk)
    sizes = [sum(c for _, c in piece) for piece in pieces]
    done = 0
    for q, (piece, n) in enumerate(zip(pieces, sizes, strict=True)):
        region = [(CONSTANTS + ((q % 2) * share.room + i) * chunk) * STICK_BYTES for i in range(share.room)]
        loads = consts if q == 0 else []
        srcs, ends = _inputs(core, share, share.x_ids[:, done:done + n], region[0], loads, seg)
        groups = _groups(ends, max(1, stream // (n if share.along else seg)))
        acc, out = stick_addrs(region[positions], n), stick_addrs(region[positions + 1], n)
        if share.y_home and share.member == 0:
            out = share.y_home.addr(core.core, share.y_ids[done:done + n], *share.where)
        recv = [stick_addrs(r, n) for r in region[positions + 3:]]
        work = {}
        for unit, (lo, hi) in halves(n).items():
            pad = stick_addrs(region[positions + 2] + lo * STICK_BYTES, hi - lo)
            dst = out if share.group == 1 and not share.along else acc
            ops = _streamed(_partial_ops(share, srcs, (lo, hi, seg), dst[lo:hi], pad, region[0]), groups,
                            f"{core.tag}q{q}.", unit)
            if share.member == 0:
                ops += _combine_ops(share, q, len(pieces), unit, acc[lo:hi], [r[lo:hi] for r in recv])
                ops += _finish_ops(share, dst[lo:hi], out[lo:hi])
            work[unit] = ops
        if share.member:
            tail = [_send(core, share, q, sizes, region[positions], region[positions + 3 + share.member - 1])]
        else:
            tail = [] if share.y_home else core.dma("store", share.y, piece, region[positions + 1])
        for g, (_, last_load) in enumerate(groups[1:], start=1):
            loads[last_load].setdefault("signal", []).extend(f"{core.tag}q{q}.in{g}>{u}" for u in sorted(work))
        core.wire_chunk(q, loads[:groups[0][1] + 1] if groups else loads, work, tail)
        done += n


def _inputs(core: CoreStreams, share: Share, ids: np.ndarray, x_lx: int, loads: list[Item],
            seg: int) -> tuple[list[np.ndarray], list[int]]:
    """Addresses of the chunk's input sticks: along the stick, one array per position over the
    output sticks; across sticks, each output stick's positions side by side from ``x_lx``. With
    them, from DRAM, the index in ``loads`` of the last load of each position (along) or of each ``seg``
    positions of an output stick (across)."""
    columns = ids if share.along else ids.T  # what one load brings, across sticks in pieces of seg
    if share.x_home:
        return [share.x_home.addr(core.core, c, *share.where) for c in columns], []
    ends = []
    for i, c in enumerate(columns):
        step = len(c) if share.along else seg
        for s in range(0, len(c), step):
            loads += core.dma("load", share.x, as_runs(c[s:s + step]), x_lx + (i * len(c) + s) * STICK_BYTES)
            ends.append(len(loads) - 1)
    return [stick_addrs(x_lx + i * len(c) * STICK_BYTES, len(c)) for i, c in enumerate(columns)], ends


def _groups(ends: list[int], per: int) -> list[tuple[int, int]]:
    """What the loads bring in groups of ``per``: each group's last position (or output stick) and the index of
    its last load."""
    last = [min(g + per, len(ends)) - 1 for g in range(0, len(ends), per)]
    return [(s, ends[s]) for s in last]


def _streamed(stages: list[tuple[int, list[Item]]], groups: list[tuple[int, int]], tag: str, unit: str) -> list[Item]:
    """The stages' ops in order, a stage's first op waiting for the group of loads that brings the last position
    or output stick it reads when that group is later than its predecessor's (a DMA unit ends its loads in
    order); the first group is the chunk's own ``in`` token."""
    lasts, ops, seen = [last for last, _ in groups], [], 0
    for index, stage in stages:
        group = bisect_left(lasts, index)
        if group > seen:
            stage[0].setdefault("wait", []).append(f"{tag}in{group}>{unit}")
            seen = group
        ops += stage
    return ops


def _partial_ops(share: Share, srcs: list[np.ndarray], span: tuple[int, int, int], dst: np.ndarray, pad: np.ndarray,
                 x_lx: int) -> list[tuple[int, list[Item]]]:
    """Reduce this core's positions of output sticks [lo, hi) into ``dst``, in stages: (the last position, or
    across sticks the last load, a stage reads; its ops). ``span`` = (lo, hi, seg); across sticks an output
    stick's positions are reduced seg at a time as their loads arrive, each later piece into its ``pad`` stick
    and folded into ``dst``."""
    lo, hi, seg = span
    dt = share.dtype
    if not share.along:
        return [stage for j in range(lo, hi) for stage in _across_ops(share, srcs[j], j, seg, (dst[j - lo],
                                                                                              pad[j - lo]), x_lx)]
    srcs = [s[lo:hi] for s in srcs]
    last = len(srcs) - 1
    mask = []
    if share.masked:  # the padding lanes of the last stick become the op's identity
        mask = masked(srcs[last], pad, MASK, FILL, dt)
        srcs[last] = pad
    if last == 0:
        return [(0, mask + fold(STEP[share.op], srcs, dst, dt))]
    stages = [fold(STEP[share.op], srcs[:2], dst, dt)] + [sfu_ops(STEP[share.op], [dst, src], dst, dt)
                                                           for src in srcs[2:]]
    stages[-1] = mask + stages[-1]  # the mask just before the stage that reads the last position
    return [(i + 1, stage) for i, stage in enumerate(stages)]  # stage i reads position i + 1 (and 0)


def _across_ops(share: Share, src: np.ndarray, j: int, seg: int, into: tuple[int, int],
                x_lx: int) -> list[tuple[int, list[Item]]]:
    """Output stick ``j``'s positions (at ``src``) reduced side by side, seg at a time: the first piece into
    ``into[0]``, each later one into ``into[1]`` and folded in. min(x) = -max(-x); LX inputs are gathered
    side by side first, never changed."""
    dt, (out, spare) = share.dtype, into
    reduce = "reduce_max" if share.op in ("max", "min") else "reduce_sum"
    fold_op = "max" if share.op in ("max", "min") else "add"
    side = src
    gather = share.op == "min" or not (np.diff(src) == STICK_BYTES).all()
    if gather:
        side = stick_addrs(x_lx + j * len(src) * STICK_BYTES, len(src))
    pieces = -(-len(src) // seg)
    stages = []
    for k, start in enumerate(range(0, len(src), seg)):
        ops = sfu_ops("neg" if share.op == "min" else "copy", [src[start:start + seg]], side[start:start + seg],
                      dt) if gather else []
        ops.append({"op": reduce, "a": int(side[start]), "out": int(spare if k else out),
                    "sticks": len(side[start:start + seg])} | ({"dtype": dt} if dt != "fp16" else {}))
        if k:
            ops += sfu_ops(fold_op, [np.array([out]), np.array([spare])], np.array([out]), dt)
        stages.append((j * pieces + k, ops))
    return stages


def _combine_ops(share: Share, q: int, chunks_: int, unit: str, acc: np.ndarray,
                 recv: list[np.ndarray]) -> list[Item]:
    """At the home: fold the other members' partials into ``acc`` as they arrive over the ring."""
    step = "max" if share.op == "min" and not share.along else STEP[share.op]
    ops = []
    for i, part in enumerate(recv, start=1):
        combine = sfu_ops(step, [acc, part], acc, share.dtype)
        combine[0].setdefault("wait", []).append(_token(share, q, f"recv{i}>{unit}"))
        if q + 2 < chunks_:
            combine[-1].setdefault("signal", []).append(_token(share, q + 2, f"free{i}<{unit}"))
        ops += combine
    return ops


def _finish_ops(share: Share, src: np.ndarray, out: np.ndarray) -> list[Item]:
    """From the combined sticks to the output: across lanes, undo min's negation, scale."""
    steps = []
    if share.along:
        steps = ["neg", "lanes_max", "neg"] if share.op == "min" else \
            ["lanes_max" if share.op == "max" else "lanes_sum"]
    elif share.op == "min":
        steps = ["neg"]
    if share.op == "mean":
        steps.append("mul")
    if not steps and (src != out).any():
        steps = ["copy"]
    ops, at = [], src
    for op in steps:
        operands = [at, np.full_like(at, SCALE)] if op == "mul" else [at]
        ops += sfu_ops(op, operands, out, share.dtype)
        at = out
    return ops


def _send(core: CoreStreams, share: Share, q: int, sizes: list[int], acc: int, slot: int) -> Item:
    """Send a member's partials of chunk ``q`` into its slot of the home's receive buffers (the home
    lays out LX as this core does); chunk q reuses the slot once the home combined chunk q - 2."""
    item = core.add("send", {"op": "send", "lx": acc, "to_core": share.home, "to_lx": slot,
                             "bytes": sizes[q] * STICK_BYTES})
    item["signal"] = [_token(share, q, f"recv{share.member}>{u}") for u in halves(sizes[q])]
    if q >= 2:
        item["wait"] = [_token(share, q, f"free{share.member}<{u}") for u in halves(sizes[q - 2])]
    return item


def _token(share: Share, q: int, what: str) -> str:
    return f"{share.kernel}.h{share.home}.q{q}.{what}"


def plan_reduction(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a reduction kernel (one reduced dim, keepdim) and return each core's share of it."""
    src, where = target.program.source, kernel.path
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
    check_division(x, division(kernel), src, where + ".work_division")
    along = dim == dim_map(x)[-1]
    step = elems_per_stick(x.dtype) if along else 1
    group, weight = slices[dim], math.prod(slices[:dim])
    if -(-x.shape[dim] // step) % group:
        raise ProgramError(f"the reduced dim splits into {group} equal slices only", src, where + ".work_division")
    per = -(-x.shape[dim] // step) // group
    host, valid = stick_hosts(y)
    owner = owner_of(y, host, division(kernel))
    shares, stream = {}, target.machine.dma.max_inflight_bytes // STICK_BYTES
    for home in np.unique(owner[valid]):
        ids = np.flatnonzero(valid & (owner == home))
        for member in range(group):
            at = host[:, ids].copy()
            x_ids = []
            for p in range(per):
                at[dim] = (member * per + p) * step
                x_ids.append(stick_of(x, at))
            share = Share(kernel.name, kernel.op, along, kernel.inputs[0], kernel.outputs[0],
                          target.residents.get(kernel.inputs[0]), target.residents.get(kernel.outputs[0]),
                          np.array(x_ids), ids, along and member == group - 1 and bool(x.shape[dim] % step),
                          member, int(home), group, constants_buffer(kernel) if _needs_constants(target.program,
                                                                                                 kernel) else None,
                          x.dtype, (src, where))
            shares[int(home) + member * weight] = partial(lower_reduction, share=share, budget=target.budget,
                                                               step=target.stepper(kernel), stream=stream)
    return shares


def constants_buffer(kernel: Kernel) -> str:
    return f"{kernel.name}_constants"


def _needs_constants(program: KernelProgram, kernel: Kernel) -> bool:
    """Mean scales; a reduction along a padded stick masks the padding."""
    x, y = (program.tensors[n].layout for n in (*kernel.inputs, *kernel.outputs))
    stick = dim_map(x)[-1]
    padded = stick >= 0 and y.shape[stick] == 1 < x.shape[stick] and x.shape[stick] % elems_per_stick(x.dtype)
    return kernel.op == "mean" or bool(padded)


def constants(program: KernelProgram) -> dict[str, dict[str, Any]]:
    """DRAM buffers the reductions need besides the program's tensors: per kernel, a stick of 1/n
    (mean), the last stick's lane mask and the padding's fill value (the op's identity)."""
    out = {}
    for kernel in program.kernels:
        if kernel.op not in STEP or not _needs_constants(program, kernel):
            continue
        x, y = (program.tensors[n].layout for n in (*kernel.inputs, *kernel.outputs))
        lanes, stick = elems_per_stick(x.dtype), dim_map(x)[-1]
        valid = (x.shape[stick] - 1) % lanes + 1 if stick >= 0 else lanes
        lowest = LOWEST.get(x.dtype, -127.0)
        fill = {"sum": 0.0, "mean": 0.0, "max": lowest, "min": -lowest}[kernel.op]
        scale = math.prod(y.shape) / math.prod(x.shape)  # 1 / elements folded into each output element
        values = [scale] * lanes + [1.0] * valid + [0.0] * (lanes - valid) + [fill] * lanes
        out[constants_buffer(kernel)] = {"bytes": CONSTANTS * STICK_BYTES, "dtype": x.dtype, "fill": values}
    return out
