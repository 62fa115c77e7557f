"""Pointwise kernels: every core streams its sticks through its SFUs, chunk by chunk.

Per core: chunks of at most ``chunk`` sticks; each chunk's input sticks are loaded into one of
two LX buffer sets (double buffering: chunk q + 2 reuses chunk q's set once q's store is done),
the two corelets' SFUs each take half the chunk, and the store writes the results back.
A second input of size 1 in some non-stick dims is broadcast: the chunk loads only the distinct
sticks it needs, and each run of output sticks sharing one of them is one SFU op with
``b_broadcast``.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..config import STICK_BYTES, Machine
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor, TensorLayout, default_layout, dim_map
from ..kernel_program.model import Kernel
from ..kernel_program.ops import OPS
from .placement import Runs, as_runs, check_division, core_runs, stick_hosts, stick_of
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
                    lx_sticks: int, b_sticks: np.ndarray | None = None) -> None:
    """Append one core's share of a pointwise kernel to its unit streams.

    ``b_sticks``, for a broadcast second input, holds that input's stick for each output stick
    of ``runs`` in order.
    """
    chunk = lx_sticks // (2 * (len(inputs) + 1))
    sets = [[(2 * i + b) * chunk * STICK_BYTES for i in range(len(inputs) + 1)] for b in range(2)]
    pieces = chunks(runs, chunk)
    done = 0
    for q, piece in enumerate(pieces):
        b = q % 2
        *in_lx, out_lx = sets[b]
        n = sum(count for _, count in piece)
        bcast = None if b_sticks is None else b_sticks[done:done + n]
        halves = [(0, -(-n // 2)), (-(-n // 2), n)]
        users = [k for k, (lo, hi) in enumerate(halves) if hi > lo]
        loads = core.dma("load", inputs[0], piece, in_lx[0])
        if len(inputs) == 2:
            wanted = piece if bcast is None else as_runs(_distinct(bcast))
            loads += core.dma("load", inputs[1], wanted, in_lx[1])
        sfu_ops = {k: _sfu_ops(sfu_op, in_lx, out_lx, *halves[k], bcast) for k in users}
        core.wire_chunk(b, q, len(pieces), loads, sfu_ops, core.dma("store", output, piece, out_lx))
        done += n


def _distinct(ids: np.ndarray) -> np.ndarray:
    """The stick ids in order of first appearance."""
    _, first = np.unique(ids, return_index=True)
    return ids[np.sort(first)]


def _sfu_ops(sfu_op: str, in_lx: list[int], out_lx: int, lo: int, hi: int, bcast: np.ndarray | None) -> list[dict]:
    """SFU ops over chunk sticks [lo, hi): one op, or one per run sharing a broadcast stick."""
    def op(start: int, end: int, b: int | None, broadcast: bool) -> dict:
        item = {"op": sfu_op, "a": in_lx[0] + start * STICK_BYTES, "out": out_lx + start * STICK_BYTES,
                "sticks": end - start}
        if b is not None:
            item["b"] = b
        if broadcast:
            item["b_broadcast"] = True
        return item
    if len(in_lx) == 1:
        return [op(lo, hi, None, False)]
    if bcast is None:
        return [op(lo, hi, in_lx[1] + lo * STICK_BYTES, False)]
    slot = {int(s): i for i, s in enumerate(_distinct(bcast))}
    edges = [lo, *(i for i in range(lo + 1, hi) if bcast[i] != bcast[i - 1]), hi]
    return [op(a, z, in_lx[1] + slot[int(bcast[a])] * STICK_BYTES, True)
            for a, z in zip(edges, edges[1:], strict=False)]


def plan_pointwise(program: KernelProgram, kernel: Kernel, tensors: list[Tensor], machine: Machine,
                   lx_sticks: int) -> dict[int, Emit]:
    """Check a pointwise kernel and return each core's share of it."""
    src, out = program.source, tensors[-1].layout
    broadcast = len(tensors) == 3 and tensors[1].layout != out
    if tensors[0].layout != out or (broadcast and not _broadcastable(tensors[1].layout, out)):
        raise ProgramError("pointwise operands must share shape, dtype and layout; only the second input may "
                           "broadcast, over non-stick dims of size 1 in the default layout", src,
                           kernel.path + ".inputs")
    if list(kernel.dims.values()) != list(out.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the output shape {list(out.shape)}",
                           src, kernel.path + ".dims")
    slices = list(kernel.slices.values())
    check_division(out, slices, src, kernel.path + ".work_division")
    host, _ = stick_hosts(out)
    shares = {}
    for core, runs in core_runs(out, slices).items():
        b_sticks = None
        if broadcast:
            ids = np.concatenate([np.arange(first, first + n) for first, n in runs])
            mine = host[:, ids] * (np.array(tensors[1].layout.shape) > 1)[:, None]  # size-1 dims at 0
            b_sticks = stick_of(tensors[1].layout, mine)
        shares[core] = partial(lower_pointwise, sfu_op=OPS[kernel.op].sfu_op, inputs=list(kernel.inputs),
                               output=kernel.outputs[0], runs=runs, lx_sticks=lx_sticks, b_sticks=b_sticks)
    return shares


def _broadcastable(b: TensorLayout, out: TensorLayout) -> bool:
    stick_dim = dim_map(out)[-1]
    return (b.dtype == out.dtype and len(b.shape) == len(out.shape)
            and b == default_layout(b.shape, b.dtype) and out == default_layout(out.shape, out.dtype)
            and b.shape[stick_dim] == out.shape[stick_dim]
            and all(n in (1, m) for n, m in zip(b.shape, out.shape, strict=True)))
