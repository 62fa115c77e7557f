"""Work division: which device sticks of a tensor each core owns, as runs of consecutive sticks.

A kernel's dims follow the host dims of its output in order; ``slices[d]`` cuts dim ``d`` into
equal pieces of whole sticks (the stick dim is cut in sticks, padding included), and cores take
the pieces with the first dim varying fastest, as real SuperDSC does.
"""

from __future__ import annotations

import numpy as np

from ..errors import ProgramError
from ..kernel_program import TensorLayout, dim_map, elems_per_stick, host_strides

Runs = list[tuple[int, int]]  # (first device stick, number of sticks)


def check_division(layout: TensorLayout, slices: list[int], file: str, path: str) -> None:
    """Every core's piece must be whole sticks in every dim."""
    stick_dim = dim_map(layout)[-1]
    eps = elems_per_stick(layout.dtype)
    for d, (size, n) in enumerate(zip(layout.shape, slices, strict=True)):
        units = -(-size // eps) if d == stick_dim else size
        if units % n:
            what = f"{units} sticks" if d == stick_dim else f"size {size}"
            raise ProgramError(f"host dim {d} ({what}) does not split into {n} equal whole-stick slices",
                               file, path)


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


def owner_of(layout: TensorLayout, host: np.ndarray, slices: list[int]) -> np.ndarray:
    """The core owning each host index: slice per dim, the first dim varying fastest."""
    eps, stick_dim = elems_per_stick(layout.dtype), dim_map(layout)[-1]
    core = np.zeros(host.shape[1], np.int64)
    weight = 1
    for d, size in enumerate(layout.shape):
        piece = max(1, (-(-size // eps) // slices[d]) * eps if d == stick_dim else size // slices[d])  # size-1: 0
        core += (host[d] // piece) * weight
        weight *= slices[d]
    return core


def as_runs(ids: np.ndarray) -> Runs:
    """Consecutive stick ids as (first, count) runs, in the given order."""
    if not ids.size:
        return []
    breaks = np.flatnonzero(np.diff(ids) != 1) + 1
    return [(int(r[0]), len(r)) for r in np.split(ids, breaks)]


def core_runs(layout: TensorLayout, slices: list[int]) -> dict[int, Runs]:
    """Per core, the runs of device sticks it owns (padding-only sticks belong to nobody)."""
    host, valid = stick_hosts(layout)
    core = owner_of(layout, host, slices)
    cores = int(np.prod(slices))
    return {c: as_runs(ids) for c in range(cores) if (ids := np.flatnonzero(valid & (core == c))).size}


def slice_index(slices: dict[str, int], core: int) -> dict[str, int]:
    """The slice of each dim that ``core`` owns: the first dim varies fastest."""
    index = {}
    for dim, count in slices.items():
        core, index[dim] = divmod(core, count)
    return index
