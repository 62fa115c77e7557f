"""Work division: which device sticks of a tensor each core owns, as runs of consecutive sticks.

A kernel's dims follow the host dims of its output in order; ``slices[d]`` cuts dim ``d`` into
pieces of whole sticks (the stick dim is cut in sticks, padding included), equal unless the
kernel is ``uneven``, and cores take the pieces with the first dim varying fastest, as real
SuperDSC does.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import itemgetter

import numpy as np

from ..errors import ProgramError
from ..kernel_program import TensorLayout, dim_map, elems_per_stick, host_strides
from ..kernel_program.model import Kernel

Runs = list[tuple[int, int]]  # (first device stick, number of sticks)


@dataclass(frozen=True)
class Division:
    """Slices per dim, in the dims' order. Even: every slice the same whole number of units (sticks
    along the stick dim, elements elsewhere). Uneven (a kernel's ``uneven``): as numpy.array_split
    cuts, the first ``units % slices`` slices take one unit more (SDSC's steady-state and epilogue
    slice sizes)."""

    slices: tuple[int, ...]
    uneven: bool = False

    def bounds(self, d: int, units: int) -> np.ndarray:
        """Where each slice of dim ``d`` starts, in units, and where the last ends."""
        n = self.slices[d]
        sizes = np.full(n, units // n) + (np.arange(n) < units % n if self.uneven else 0)
        return np.concatenate([[0], np.cumsum(sizes)])


def division(kernel: Kernel, dims: list[str] | None = None) -> Division:
    """A kernel's division over ``dims`` (default: all its dims, in order)."""
    return Division(tuple(kernel.slices[d] for d in (dims or kernel.slices)), kernel.uneven)


def _units(layout: TensorLayout, d: int) -> int:
    eps = elems_per_stick(layout.dtype)
    return -(-layout.shape[d] // eps) if d == dim_map(layout)[-1] else layout.shape[d]


def check_division(layout: TensorLayout, div: Division, file: str, path: str) -> None:
    """Every core's piece must be whole sticks in every dim (and, uneven, at least one)."""
    stick_dim = dim_map(layout)[-1]
    for d, n in enumerate(div.slices):
        units = _units(layout, d)
        if (units < n) if div.uneven else (units % n):
            what = f"{units} sticks" if d == stick_dim else f"size {layout.shape[d]}"
            if div.uneven:
                raise ProgramError(f"host dim {d} ({what}) has fewer than one stick or row for each of {n} slices",
                                   file, path)
            raise ProgramError(f"host dim {d} ({what}) does not split into {n} equal whole-stick slices; "
                               "\"uneven\": true lets slices differ by one", file, path)


def stick_hosts(layout: TensorLayout) -> tuple[np.ndarray, np.ndarray]:
    """Host index (per host dim) of the first element of every device stick, and which are real."""
    owners, strides = dim_map(layout)[:-1], layout.stride_map[:-1]
    coords = np.indices(layout.device_size[:-1]).reshape(len(owners), -1)
    hstride = host_strides(layout.shape)
    host = np.zeros((len(layout.shape), coords.shape[1]), np.int64)
    for j, d in enumerate(owners):
        if d >= 0:
            host[d] += coords[j] * (strides[j] // hstride[d])
    valid = (host < np.array(layout.shape)[:, None]).all(axis=0)
    return host, valid


def stick_of(layout: TensorLayout, host: np.ndarray) -> np.ndarray:
    """Device stick index holding each host index (columns of ``host``), by the layout's strides."""
    owners, strides = dim_map(layout)[:-1], layout.stride_map[:-1]
    hstride = host_strides(layout.shape)
    stick = np.zeros(host.shape[1], np.int64)
    for d, stride, size in zip(owners, strides, layout.device_size[:-1], strict=True):
        coord = (host[d] // (stride // hstride[d])) % size if d >= 0 else 0
        stick = stick * size + coord
    return stick


def grid_sticks(layout: TensorLayout, axes: list[np.ndarray], order: tuple[int, ...]) -> np.ndarray:
    """``stick_of`` of every host index of a grid, host dim ``d`` ranging over ``axes[d]``, as an array with
    one axis per host dim in ``order`` (outermost first). Each device dim steps one host dim, so a stick's id
    is a sum of one term per host dim: worked out on the short axes and broadcast, the same integers as
    ``stick_of`` over the grid spelled out index by index (a matmul's operand tiles: most of its lowering)."""
    owners, strides = dim_map(layout)[:-1], layout.stride_map[:-1]
    hstride = host_strides(layout.shape)
    terms = [np.zeros(len(a), np.int64) for a in axes]
    weight = 1
    for d, stride, size in reversed(list(zip(owners, strides, layout.device_size[:-1], strict=True))):
        if d >= 0:
            terms[d] += (axes[d] // (stride // hstride[d])) % size * weight
        weight *= size
    grid = np.zeros([len(axes[d]) for d in order], np.int64)
    for i, d in enumerate(order):
        grid += terms[d].reshape([-1 if j == i else 1 for j in range(len(order))])
    return grid


def owner_of(layout: TensorLayout, host: np.ndarray, div: Division) -> np.ndarray:
    """The core owning each host index: slice per dim, the first dim varying fastest. A dim of
    size 1 is never cut (a reduction's output keeps the reduced dim as 1)."""
    eps, stick_dim = elems_per_stick(layout.dtype), dim_map(layout)[-1]
    core = np.zeros(host.shape[1], np.int64)
    weight = 1
    for d, size in enumerate(layout.shape):
        if size > 1:
            bounds = div.bounds(d, _units(layout, d)) * (eps if d == stick_dim else 1)
            core += (np.searchsorted(bounds, host[d], side="right") - 1) * weight
        weight *= div.slices[d]
    return core


def as_runs(ids: np.ndarray) -> Runs:
    """Consecutive stick ids as (first, count) runs, in the given order."""
    if not ids.size:
        return []
    heads = np.flatnonzero(np.concatenate([[True], np.diff(ids) != 1]))  # where each run starts
    return list(zip(ids[heads].tolist(), np.diff(np.append(heads, ids.size)).tolist(), strict=True))


def run_ids(runs: Runs) -> np.ndarray:
    """The stick ids of ``runs``, in their order (``as_runs`` undone), with numpy over the runs: a core's share
    of a tensor can be tens of thousands of one-stick runs."""
    first, count = np.array(runs, np.int64).reshape(-1, 2).T
    return np.repeat(first - (np.cumsum(count) - count), count) + np.arange(count.sum())


def run_sticks(runs: Runs) -> int:
    """Sticks in ``runs``."""
    return sum(map(itemgetter(1), runs))


def cut_runs(runs: Runs, lo: int, hi: int) -> Runs:
    """Sticks ``lo`` .. ``hi`` of ``runs`` (counted in their order) as runs: ``as_runs`` of those stick ids,
    without making the ids (a split-K reduction cuts every tile so), with numpy over the runs."""
    flat = np.fromiter(chain.from_iterable(runs), np.int64, 2 * len(runs))
    first, count = flat[0::2], flat[1::2]
    pos = np.cumsum(count) - count
    a, b = np.maximum(lo - pos, 0), np.minimum(hi - pos, count)  # the part of each run inside lo .. hi
    keep = a < b
    start, size = first[keep] + a[keep], (b - a)[keep]
    if not start.size:
        return []
    heads = np.flatnonzero(np.concatenate([[True], start[1:] != start[:-1] + size[:-1]]))  # touching pieces merge
    return list(zip(start[heads].tolist(), np.add.reduceat(size, heads).tolist(), strict=True))


def rows_as_runs(ids: np.ndarray, per: int = 1) -> list[Runs]:
    """``as_runs`` of each row of a 2-D array, worked out for all rows at once; with ``per`` > 1, one list for each
    stretch of that many rows, its runs still broken at every row."""
    starts, counts, per_row = _row_runs(ids)
    if per > 1:
        per_row = per_row.reshape(-1, per).sum(1)
    bounds = np.concatenate([[0], np.cumsum(per_row)]).tolist()
    return [list(zip(starts[lo:hi], counts[lo:hi], strict=True)) for lo, hi in zip(bounds, bounds[1:], strict=False)]


def rows_as_one_runs(ids: np.ndarray) -> Runs:
    """``rows_as_runs`` of a 2-D array, its rows' runs one after another in one list."""
    starts, counts, _ = _row_runs(ids)
    return list(zip(starts, counts, strict=True))


def _row_runs(ids: np.ndarray) -> tuple[list[int], list[int], np.ndarray]:
    """The first stick and length of every run of consecutive ids in each row, row by row, and runs per row."""
    rows, width = ids.shape
    if not width:
        return [], [], np.zeros(rows, np.int64)
    first = np.ones(ids.shape, bool)
    first[:, 1:] = np.diff(ids, axis=1) != 1
    r, c = np.nonzero(first)  # where each run starts, row by row
    ends = np.append(np.where(r[1:] == r[:-1], c[1:], width), width)
    return ids[r, c].tolist(), (ends - c).tolist(), np.bincount(r, minlength=rows)


def core_runs(layout: TensorLayout, div: Division) -> dict[int, Runs]:
    """Per core, the runs of device sticks it owns (padding-only sticks belong to nobody)."""
    host, valid = stick_hosts(layout)
    core = owner_of(layout, host, div)
    cores = int(np.prod(div.slices))
    return {c: as_runs(ids) for c in range(cores) if (ids := np.flatnonzero(valid & (core == c))).size}


def slice_index(slices: dict[str, int], core: int) -> dict[str, int]:
    """The slice of each dim that ``core`` owns: the first dim varies fastest."""
    index = {}
    for dim, count in slices.items():
        core, index[dim] = divmod(core, count)
    return index
