"""ReStickifyOpHBM: y = x.reshape(x_shape)[window].permute(perm).reshape(y.shape), DRAM to DRAM, any layouts on
either side.

``x_shape`` (attribute: x's elements read row-major in another shape; default: x's own), ``perm`` (attribute;
default: none), ``window`` (attribute: a start and a stop per dim of that shape, flat; default: all of it) and
the reshape are spyre-emu's extension of torch-spyre's op, which keeps the shape and changes only the layout;
they let the front end move views and slices on the card in one pass.
For every output stick the planner finds, per lane, the input stick and lane holding that element.
When each output stick is one input stick lane for lane, the sticks are gathered (loaded in output
order, stored back, no SFU). When the stick dim changes, output sticks group into square blocks:
lanes input sticks loaded side by side, one SFU ``transpose``, lanes output sticks stored.
Anything else (a stick straddling two input sticks) is a clear error.
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, TensorLayout, dim_map, elems_per_stick
from ..kernel_program.model import Kernel
from .placement import check_division, core_runs, division, run_ids, stick_hosts, stick_of
from .streams import CoreStreams, Emit, Item, dma_item
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
            loads += moves(core, "load", x, ins, src)
            op = {"op": "transpose", "a": src, "out": dst, "sticks": lanes} | ({"dtype": dtype} if dtype != "fp16"
                                                                              else {})
            work.setdefault(f"sfu{i % 2}", []).append(op)
            stores += moves(core, "store", y, outs, dst)
        core.wire_chunk(q, loads, work, stores)


def lower_gather(core: CoreStreams, *, x: tuple[str, ...], y: str, pairs: np.ndarray, budget: int,
                 step: Stepper) -> None:
    """Whole sticks: ``pairs[:, j]`` = (input tensor in ``x``, its stick, output stick) of the core's j-th
    output stick. LX holds a chunk in output order, or in the inputs' order when that cuts fewer DRAM
    pieces (an outer transpose's output runs take every eighth input stick): its stores then pattern LX."""
    order = _source_order(pairs)
    by_source = order is not None
    if by_source:
        pairs = pairs[:, order]
    per_set = step(pairs.shape[1], budget // 2)
    for q, start in enumerate(range(0, pairs.shape[1], per_set)):
        at = (q % 2) * per_set * STICK_BYTES
        part = pairs[:, start:start + per_set]
        loads = moves(core, "load", x, part[1], at, part[0])
        stores = (scattered if by_source else moves)(core, "store", y, part[2], at)
        loads[-1].setdefault("signal", []).append(f"{core.tag}q{q}.loaded")
        stores[0].setdefault("wait", []).append(f"{core.tag}q{q}.loaded")
        core.wire_chunk(q, loads, {}, stores)


def _source_order(pairs: np.ndarray) -> np.ndarray | None:
    """The pairs in the inputs' order when loading so and storing each output run with an LX pattern moves
    fewer DRAM pieces (runs of sticks, each set up on its own) than loading in the output's order; else None.
    Inputs already ascending in output order (most gathers: views that keep rows together, cat) are in both
    orders at once."""
    tensor_step = np.diff(pairs[0])
    if (tensor_step >= 0).all() and (np.diff(pairs[1])[tensor_step == 0] > 0).all():
        return None
    order = np.lexsort((pairs[1], pairs[0]))
    slot = np.empty_like(order)
    slot[order] = np.arange(order.size)
    by_output = _runs(pairs[1], pairs[0]) + _runs(pairs[2])
    by_source = _runs(pairs[1, order], pairs[0, order]) + _segments(pairs[2], slot).size
    return order if by_source < by_output else None


def _runs(ids: np.ndarray, which: np.ndarray | None = None) -> int:
    """Maximal runs of consecutive sticks (of one tensor) in ``ids``."""
    breaks = np.diff(ids) != 1
    if which is not None:
        breaks |= np.diff(which) != 0
    return int(breaks.sum()) + 1


def _segments(sticks: np.ndarray, slots: np.ndarray) -> np.ndarray:
    """Where each run of consecutive ``sticks`` (ascending) whose ``slots`` step forward by one stride starts."""
    step = np.diff(slots)
    head = np.concatenate([[True], (np.diff(sticks) != 1) | (step < 1)])
    for k in (np.flatnonzero(step[1:] != step[:-1]) + 2).tolist():  # a stride change cuts a run of three or more
        head[k] |= not head[k - 1]
    return np.flatnonzero(head)


def scattered(core: CoreStreams, unit: str, tensor: str, ids: np.ndarray, lx: int) -> list[Item]:
    """DMA between device sticks ``ids`` of ``tensor`` (LX slot i <-> ids[i]) and LX from ``lx``: one
    descriptor per run of consecutive sticks, its LX side a pattern of one-stick pieces at the slots'
    stride."""
    order = np.argsort(ids, kind="stable")
    sticks = ids[order]
    heads = _segments(sticks, order)
    items = []
    for h, n in zip(heads.tolist(), np.diff(np.append(heads, sticks.size)).tolist(), strict=True):
        item = dma_item(unit, tensor, int(sticks[h]), n, lx + int(order[h]) * STICK_BYTES)
        if n > 1 and order[h + 1] - order[h] != 1:
            item.update(lx_piece=STICK_BYTES, lx_stride=int(order[h + 1] - order[h]) * STICK_BYTES)
        items.append(core.add(unit, item))
    return items


def moves(core: CoreStreams, unit: str, tensor: str | tuple[str, ...], ids: np.ndarray, lx: int,
          which: np.ndarray | None = None) -> list[Item]:
    """DMA between device sticks ``ids`` and consecutive LX slots from ``lx`` (slot i <-> ids[i];
    -1 skips the slot), from ``tensor``, or ``tensor[which[i]]`` for slot i (a cat's inputs). Runs consecutive in
    both are found with numpy; runs filling consecutive slots of one tensor at a constant DRAM stride are one
    strided descriptor, as a DMA unit issues them back to back either way: a gather of scattered sticks is
    100,000s of one-stick runs, and mostly a few patterns (an outer transpose's, 8 sticks apart)."""
    names = (tensor,) if isinstance(tensor, str) else tensor
    if which is None and ids.size and ids[0] >= 0 and ids[-1] - ids[0] == ids.size - 1 and (np.diff(ids) == 1).all():
        return core.dma(unit, names[0], [(int(ids[0]), ids.size)], lx)  # one run (a transpose block's sticks, mostly)
    which = np.zeros_like(ids) if which is None else which
    slots = np.flatnonzero(ids >= 0)
    if not slots.size:
        return []
    heads = np.flatnonzero(np.concatenate([[True], (np.diff(slots) != 1) | (np.diff(ids[slots]) != 1)
                                           | (np.diff(which[slots]) != 0)]))
    firsts, sizes = slots[heads], np.diff(np.append(heads, slots.size))
    groups: list[tuple[int, int, list[tuple[int, int]]]] = []  # (first slot, tensor, runs) filling consecutive slots
    end = -1
    for slot, stick, n, w in zip(firsts.tolist(), ids[firsts].tolist(), sizes.tolist(), which[firsts].tolist(),
                                 strict=True):
        if slot != end or w != groups[-1][1]:
            groups.append((slot, w, []))
        groups[-1][2].append((stick, n))
        end = slot + n
    return [item for slot, w, runs in groups for item in core.dma(unit, names[w], runs, lx + slot * STICK_BYTES)]


def plan_restickify(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a restickify kernel and return each core's share of it."""
    src, where = target.program.source, kernel.path
    x, y = (t.layout for t in tensors)
    shape = tuple(kernel.attrs.get("x_shape") or x.shape)
    if math.prod(shape) != math.prod(x.shape) or min(shape) < 1:
        raise ProgramError(f"x_shape {list(shape)} does not hold the input's {math.prod(x.shape)} elements "
                           f"(shape {list(x.shape)})", src, where + ".attrs.x_shape")
    perm = tuple(kernel.attrs.get("perm") or range(len(shape)))
    if sorted(perm) != list(range(len(shape))):
        raise ProgramError(f"perm {list(perm)} is not a permutation of the {len(shape)} dims x is read in", src,
                           where + ".attrs.perm")
    window = _window(kernel.attrs.get("window") or [], shape, (src, where + ".attrs.window"))
    sizes = [b - a for a, b in window]
    if math.prod(sizes) != math.prod(y.shape) or x.dtype != y.dtype or list(kernel.dims.values()) != list(y.shape):
        raise ProgramError(f"restickify gives x.reshape(x_shape)[window].permute(perm).reshape(y.shape) in x's dtype, "
                           f"over dims equal to y's shape: x[window] {sizes} {x.dtype}, y {list(y.shape)} {y.dtype}, "
                           f"dims {list(kernel.dims.values())}", src, where + ".dims")
    div = division(kernel)
    check_division(y, div, src, where + ".work_division")
    shares = {}
    for core, runs in core_runs(y, div).items():
        ids = run_ids(runs)
        stick, lane = _sources(x, y, (shape, perm, window), ids)
        gathered = gathered_sticks(stick, lane)
        if gathered.all():
            pairs = np.stack([np.zeros_like(ids), first_source(stick), ids])
            shares[core] = partial(lower_gather, x=(tensors[0].name,), y=tensors[1].name, pairs=pairs,
                                   budget=target.budget, step=target.stepper(kernel))
            continue
        blocks = _blocks(stick, lane, ids, (src, where))
        shares[core] = partial(lower_blocks, x=tensors[0].name, y=tensors[1].name, blocks=blocks,
                               lanes=elems_per_stick(x.dtype), budget=target.budget, step=target.stepper(kernel),
                               dtype=x.dtype)
    return shares


def _window(flat: list[int], shape: tuple[int, ...], where: tuple[str, str]) -> list[tuple[int, int]]:
    """(start, stop) per dim of x from the attribute's flat list; all of x when it is empty."""
    if not flat:
        return [(0, n) for n in shape]
    pairs = list(zip(flat[::2], flat[1::2], strict=True)) if len(flat) == 2 * len(shape) else []
    if not pairs or any(not 0 <= a < b <= n for (a, b), n in zip(pairs, shape, strict=True)):
        raise ProgramError(f"window {flat} is not a start and a stop (0 <= start < stop <= size) for each dim of "
                           f"x {list(shape)}", *where)
    return pairs


def _sources(x: TensorLayout, y: TensorLayout, read: tuple[tuple[int, ...], tuple[int, ...], list[tuple[int, int]]],
             ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For output sticks ``ids`` and each lane, the input stick and lane holding that element of
    y = x.reshape(shape)[window].permute(perm).reshape(y.shape), ``read`` = (shape, perm, window); -1 for
    the output's padding lanes."""
    shape, perm, window = read
    at, valid = lane_hosts(y, ids)
    flat = np.ravel_multi_index(tuple(np.where(valid, a, 0) for a in at), y.shape)
    permuted = np.unravel_index(flat, tuple(window[d][1] - window[d][0] for d in perm))
    host = np.empty((len(shape), *flat.shape), np.int64)
    for i, d in enumerate(perm):
        host[d] = permuted[i] + window[d][0]
    if shape != x.shape:
        host = np.stack(np.unravel_index(np.ravel_multi_index(tuple(host), shape), x.shape))
    stick, lane = stick_lanes(x, host)
    return np.where(valid, stick, -1), np.where(valid, lane, -1)


def lane_hosts(y: TensorLayout, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The host index of every lane of output sticks ``ids`` ([y dims, sticks, lanes]) and which lanes
    hold an element (not padding)."""
    lanes, b = elems_per_stick(y.dtype), dim_map(y)[-1]
    at = np.repeat(stick_hosts(y)[0][:, ids, None], lanes, axis=2)
    valid = np.zeros(at.shape[1:], bool)
    if b >= 0:
        at[b] += np.arange(lanes)
        valid = at[b] < y.shape[b]
    else:
        valid[:, 0] = True
    return at, valid


def stick_lanes(x: TensorLayout, host: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The device stick and lane of x holding each host index (``host``: [x dims, ...])."""
    stick = stick_of(x, host.reshape(len(x.shape), -1)).reshape(host.shape[1:])
    a = dim_map(x)[-1]
    return stick, host[a] % elems_per_stick(x.dtype) if a >= 0 else np.zeros_like(stick)


def first_source(stick: np.ndarray) -> np.ndarray:
    """Each output stick's first valid source stick."""
    return stick[np.arange(len(stick)), (stick >= 0).argmax(axis=1)]


def gathered_sticks(stick: np.ndarray, lane: np.ndarray) -> np.ndarray:
    """Output sticks that are one input stick, lane for lane."""
    padding = stick < 0
    one_source = (padding | (stick == first_source(stick)[:, None])).all(axis=1)
    in_place = (padding | (lane == np.arange(lane.shape[1]))).all(axis=1)
    return one_source & in_place


def _blocks(stick: np.ndarray, lane: np.ndarray, ids: np.ndarray,
            where: tuple[str, str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Group output sticks into transposable blocks: output stick o takes lane i(o) of the block's
    input sticks, one per output lane; in the block, output slot i(o) holds o."""
    lanes = stick.shape[1]
    valid = stick >= 0
    first = lane[np.arange(len(lane)), valid.argmax(axis=1)]
    if (np.where(valid, lane, first[:, None]) != first[:, None]).any():
        raise ProgramError("an output stick takes different lanes of its input sticks: neither a gather nor a "
                           "transpose of lanes x lanes blocks", *where)
    rows, group = unique_rows(stick)
    outs = np.full((len(rows), lanes), -1, np.int64)
    outs[group, first] = ids
    if np.count_nonzero(outs >= 0) != len(ids):  # a slot written twice
        raise ProgramError("two output sticks take the same lane of one block's input sticks", *where)
    return list(zip(rows, outs, strict=True))


def unique_rows(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(a, axis=0, return_inverse=True) for a 2-D int array, by one lexsort over its columns: numpy
    sorts the rows as records there, which took a Granite block's weight transposes 17 s."""
    order = np.lexsort(a.T[::-1])
    ranked = a[order]
    new = np.concatenate([[True], (ranked[1:] != ranked[:-1]).any(axis=1)])
    group = np.empty(len(a), np.int64)
    group[order] = np.cumsum(new) - 1
    return ranked[new], group
