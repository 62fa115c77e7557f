"""cat: y = cat(inputs, dim), DRAM to DRAM, DMA only (a transport op, as on silicon).

Two or more inputs of one dtype, shapes equal outside ``dim`` (an attribute), in any layouts. Each
output stick must be one stick of one input, lane for lane: it is gathered as restickify gathers
(loaded into LX in double-buffered chunks and stored back, one DMA per run consecutive in the input,
the output and LX). A cat along the stick dim whose inputs before the last are not whole sticks
along it, or of an input with another stick dim, would need lanes of several input sticks in one
output stick (an SFU shift or transpose) and is refused.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..errors import ProgramError
from ..kernel_program import Tensor, TensorLayout
from ..kernel_program.model import Kernel
from .placement import check_division, core_runs, division, run_ids
from .restickify import first_source, gathered_sticks, lane_hosts, lower_gather, stick_lanes
from .streams import Emit
from .target import Target


def plan_cat(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a cat kernel and return each core's share of it."""
    src, where = target.program.source, kernel.path
    xs, y = [t.layout for t in tensors[:-1]], tensors[-1].layout
    dim = kernel.attrs["dim"]
    _check(xs, y, dim, list(kernel.dims.values()), (src, where))
    div = division(kernel)
    check_division(y, div, src, where + ".work_division")
    starts = np.cumsum([0] + [x.shape[dim] for x in xs])
    shares = {}
    for core, runs in core_runs(y, div).items():
        ids = run_ids(runs)
        which, stick, lane = _sources(xs, y, dim, starts, ids)
        key = np.where(stick >= 0, stick * len(xs) + which, -1)  # (input, stick) as one number
        whole = gathered_sticks(key, lane)
        if not whole.all():
            raise ProgramError(f"output stick {int(ids[np.argmin(whole)])} is not one input stick lane for lane: "
                               f"every input needs y's stick dim and, along it, every input but the last whole "
                               f"sticks (sizes {[x.shape[dim] for x in xs[:-1]]} along dim {dim}, multiples of "
                               f"{lane.shape[1]} expected there)", src, where + ".inputs")
        keys = first_source(key)
        pairs = np.stack([keys % len(xs), keys // len(xs), ids])
        shares[core] = partial(lower_gather, x=tuple(t.name for t in tensors[:-1]), y=tensors[-1].name,
                               pairs=pairs, budget=target.budget, step=target.stepper(kernel))
    return shares


def _check(xs: list[TensorLayout], y: TensorLayout, dim: int, dims: list[int], where: tuple[str, str]) -> None:
    """One dtype; shapes equal outside ``dim``, whose sizes add up to y's; kernel dims equal to y's shape."""
    rank = len(y.shape)
    if not isinstance(dim, int) or not 0 <= dim < rank:
        raise ProgramError(f"dim {dim} is not a dim of the output's {rank}", where[0], where[1] + ".attrs.dim")
    others = [n for d, n in enumerate(y.shape) if d != dim]
    alike = all(x.dtype == y.dtype and len(x.shape) == rank and [n for d, n in enumerate(x.shape) if d != dim] == others
                for x in xs)
    if not alike or sum(x.shape[dim] for x in xs) != y.shape[dim] or dims != list(y.shape):
        raise ProgramError(f"cat along dim {dim} takes inputs of y's dtype and rank, equal to y's shape outside "
                           f"dim {dim} and adding up to it along it, over dims equal to y's shape: inputs "
                           f"{[list(x.shape) for x in xs]} {[x.dtype for x in xs]}, y {list(y.shape)} {y.dtype}, "
                           f"dims {dims}", where[0], where[1] + ".inputs")


def _sources(xs: list[TensorLayout], y: TensorLayout, dim: int, starts: np.ndarray,
             ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For output sticks ``ids`` and each lane: the input holding that element of y, and the stick
    and lane of that input holding it; -1 for the output's padding lanes."""
    at, valid = lane_hosts(y, ids)
    which = np.searchsorted(starts, at[dim], side="right") - 1
    stick, lane = np.full(which.shape, -1), np.full(which.shape, -1)
    for k, x in enumerate(xs):
        mine = valid & (which == k)
        host = at[:, mine]
        host[dim] -= starts[k]
        stick[mine], lane[mine] = stick_lanes(x, host)
    return which, stick, lane
