"""Pointwise kernels: every core streams its sticks through its SFUs, chunk by chunk.

Per core: chunks of at most ``chunk`` sticks; each chunk's input sticks are loaded into one of
two LX buffer sets (double buffering: chunk q + 2 reuses chunk q's set once q's store is done),
the two corelets' SFUs each take half the chunk, and the store writes the results back.
"""

from __future__ import annotations

from functools import partial

from ..config import STICK_BYTES, Machine
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor
from ..kernel_program.model import Kernel
from ..kernel_program.ops import OPS
from .placement import Runs, check_division, core_runs
from .streams import CoreStreams, Emit


def chunks(runs: Runs, size: int) -> list[Runs]:
    """Cut a core's runs into chunks of at most ``size`` sticks, keeping device order."""
    out: list[Runs] = [[]]
    room = size
    for first, count in runs:
        at, left = first, count
        while left:
            if room == 0:
                out.append([])
                room = size
            take = min(left, room)
            out[-1].append((at, take))
            at, left, room = at + take, left - take, room - take
    return out


def lower_pointwise(core: CoreStreams, *, sfu_op: str, inputs: list[str], output: str, runs: Runs,
                    lx_sticks: int) -> None:
    """Append one core's share of a pointwise kernel to its unit streams."""
    chunk = lx_sticks // (2 * (len(inputs) + 1))
    sets = [[(2 * i + b) * chunk * STICK_BYTES for i in range(len(inputs) + 1)] for b in range(2)]
    pieces = chunks(runs, chunk)
    for q, piece in enumerate(pieces):
        b, tag = q % 2, core.tag
        *in_lx, out_lx = sets[b]
        n = sum(count for _, count in piece)
        halves = [(0, -(-n // 2)), (-(-n // 2), n)]
        users = [k for k, (lo, hi) in enumerate(halves) if hi > lo]
        loads = [core.dma("load", name, piece, lx) for name, lx in zip(inputs, in_lx, strict=True)]
        first = [ins for group in loads for ins in group][0]
        if q >= 2:
            first.setdefault("wait", []).append(f"{tag}free{b}")
        loads[-1][-1]["signal"] = [f"{tag}in{b}_sfu{k}" for k in users]
        for k in users:
            lo, hi = halves[k]
            op = {"op": sfu_op, "a": in_lx[0] + lo * STICK_BYTES, "out": out_lx + lo * STICK_BYTES,
                  "sticks": hi - lo, "wait": [f"{tag}in{b}_sfu{k}"], "signal": [f"{tag}out{b}_sfu{k}"]}
            if len(in_lx) == 2:
                op["b"] = in_lx[1] + lo * STICK_BYTES
            core.add(f"sfu{k}", op)
        stores = core.dma("store", output, piece, out_lx)
        stores[0]["wait"] = [f"{tag}out{b}_sfu{k}" for k in users]
        if q + 2 < len(pieces):
            stores[-1]["signal"] = [f"{tag}free{b}"]


def plan_pointwise(program: KernelProgram, kernel: Kernel, tensors: list[Tensor], machine: Machine,
                      lx_sticks: int) -> dict[int, Emit]:
    """Check a pointwise kernel and return each core's share of it."""
    src, out = program.source, tensors[-1]
    if any(t.layout != out.layout for t in tensors):
        raise ProgramError("pointwise operands must share shape, dtype and layout (broadcasting is not "
                           "lowered yet)", src, kernel.path + ".inputs")
    if list(kernel.dims.values()) != list(out.layout.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the output shape "
                           f"{list(out.layout.shape)}", src, kernel.path + ".dims")
    slices = list(kernel.slices.values())
    check_division(out.layout, slices, src, kernel.path + ".work_division")
    sfu_op = OPS[kernel.op].sfu_op
    return {core: partial(lower_pointwise, sfu_op=sfu_op, inputs=list(kernel.inputs), output=kernel.outputs[0],
                          runs=runs, lx_sticks=lx_sticks)
            for core, runs in core_runs(out.layout, slices).items()}
