"""ReStickifyOpHBM: the same host tensor from one device layout into another, DRAM to DRAM.

When the stick dim changes (host dim ``a`` to host dim ``b``), the data moves in square blocks of
lanes x lanes elements: the input sticks that hold ``b`` values b0..b0+lanes-1 of one ``a`` block
are loaded side by side, one SFU ``transpose`` turns them into the output sticks for ``a`` values
a0..a0+lanes-1, and those are stored. When only the order of the other dims changes, the sticks
are loaded in output order and stored back without the SFU.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, dim_map, elems_per_stick
from ..kernel_program.model import Kernel
from .placement import check_division, core_runs, stick_hosts, stick_of
from .streams import CoreStreams, Emit, Item
from .target import Stepper, Target


def lower_blocks(core: CoreStreams, *, x: str, y: str, blocks: list[tuple[np.ndarray, np.ndarray]], lanes: int,
                 budget: int, step: Stepper, dtype: str) -> None:
    """Each block: (the input sticks side by side, the output sticks in block order; -1 = absent)."""
    per_set = step(len(blocks), budget // (4 * lanes))  # blocks per buffer set: input and output, two sets
    for q, start in enumerate(range(0, len(blocks), per_set)):
        base = (q % 2) * 2 * per_set * lanes * STICK_BYTES
        out_base = base + per_set * lanes * STICK_BYTES
        loads: list[Item] = []
        stores: list[Item] = []
        work: dict[str, list[Item]] = {}
        for i, (ins, outs) in enumerate(blocks[start:start + per_set]):
            src, dst = base + i * lanes * STICK_BYTES, out_base + i * lanes * STICK_BYTES
            loads += _moves(core, "load", x, ins, src)
            op = {"op": "transpose", "a": src, "out": dst, "sticks": lanes} | ({"dtype": dtype} if dtype != "fp16"
                                                                              else {})
            work.setdefault(f"sfu{i % 2}", []).append(op)
            stores += _moves(core, "store", y, outs, dst)
        core.wire_chunk(q, loads, work, stores)


def lower_gather(core: CoreStreams, *, x: str, y: str, pairs: np.ndarray, budget: int, step: Stepper) -> None:
    """Same stick dim: ``pairs[:, j]`` = (input stick, output stick) of the core's j-th output stick."""
    per_set = step(pairs.shape[1], budget // 2)
    for q, start in enumerate(range(0, pairs.shape[1], per_set)):
        at = (q % 2) * per_set * STICK_BYTES
        part = pairs[:, start:start + per_set]
        loads = _moves(core, "load", x, part[0], at)
        stores = _moves(core, "store", y, part[1], at)
        loads[-1].setdefault("signal", []).append(f"{core.tag}q{q}.loaded")
        stores[0].setdefault("wait", []).append(f"{core.tag}q{q}.loaded")
        core.wire_chunk(q, loads, {}, stores)


def _moves(core: CoreStreams, unit: str, tensor: str, ids: np.ndarray, lx: int) -> list[Item]:
    """DMA between device sticks ``ids`` and consecutive LX slots from ``lx`` (slot i <-> ids[i];
    -1 skips the slot), one instruction per run consecutive in both."""
    items = []
    slots = np.flatnonzero(ids >= 0)
    if not slots.size:
        return items
    breaks = np.flatnonzero((np.diff(slots) != 1) | (np.diff(ids[slots]) != 1)) + 1
    for run in np.split(slots, breaks):
        items += core.dma(unit, tensor, [(int(ids[run[0]]), len(run))], lx + int(run[0]) * STICK_BYTES)
    return items


def plan_restickify(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a restickify kernel and return each core's share of it."""
    src, where = target.program.source, kernel.path
    x, y = (t.layout for t in tensors)
    if x.shape != y.shape or x.dtype != y.dtype or list(kernel.dims.values()) != list(x.shape):
        raise ProgramError(f"restickify keeps shape and dtype, and its dims are the shape: x {list(x.shape)} "
                           f"{x.dtype}, y {list(y.shape)} {y.dtype}, dims {list(kernel.dims.values())}", src,
                           where + ".dims")
    slices = list(kernel.slices.values())
    check_division(x, slices, src, where + ".work_division")
    check_division(y, slices, src, where + ".work_division")
    a, b, lanes = dim_map(x)[-1], dim_map(y)[-1], elems_per_stick(x.dtype)
    if a != b and min(a, b) < 0:
        raise ProgramError("restickify to or from a stick dim of size 1 is not lowered", src, where + ".outputs")
    host, _ = stick_hosts(y)
    shares = {}
    for core, runs in core_runs(y, slices).items():
        ids = np.concatenate([np.arange(s, s + n) for s, n in runs])
        at = host[:, ids]
        if a == b:
            pairs = np.stack([stick_of(x, at), ids])
            shares[core] = partial(lower_gather, x=tensors[0].name, y=tensors[1].name, pairs=pairs,
                                   budget=target.budget, step=target.stepper(kernel))
            continue
        blocks = _blocks(x, y, at, ids, a, b, lanes)
        shares[core] = partial(lower_blocks, x=tensors[0].name, y=tensors[1].name, blocks=blocks, lanes=lanes,
                               budget=target.budget, step=target.stepper(kernel), dtype=x.dtype)
    return shares


def _blocks(x, y, at: np.ndarray, ids: np.ndarray, a: int, b: int, lanes: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Group a core's output sticks into lanes x lanes blocks: output stick i of a block holds
    a = a0 + i; input stick j holds b = b0 + j."""
    corner = at.copy()
    corner[a] -= corner[a] % lanes
    keys, inverse = np.unique(corner, axis=1, return_inverse=True)
    blocks = []
    for k in range(keys.shape[1]):
        outs = np.full(lanes, -1, np.int64)
        mine = np.flatnonzero(inverse.reshape(-1) == k)
        outs[at[a, mine] - keys[a, k]] = ids[mine]
        rows = np.repeat(keys[:, k:k + 1], lanes, axis=1)
        rows[b] += np.arange(lanes)
        valid = rows[b] < x.shape[b]
        ins = np.full(lanes, -1, np.int64)
        ins[valid] = stick_of(x, rows[:, valid])
        blocks.append((ins, outs))
    return blocks
