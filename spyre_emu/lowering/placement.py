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


def core_runs(layout: TensorLayout, slices: list[int]) -> dict[int, Runs]:
    """Per core, the runs of device sticks it owns (padding-only sticks belong to nobody)."""
    eps = elems_per_stick(layout.dtype)
    owners = dim_map(layout)[:-1]
    strides = layout.stride_map[:-1]
    coords = np.indices(layout.device_size[:-1]).reshape(len(owners), -1)
    hstride = host_strides(layout.shape)
    stick_dim = dim_map(layout)[-1]
    core = np.zeros(coords.shape[1], np.int64)
    valid = np.ones(coords.shape[1], bool)
    weight = 1
    for d, size in enumerate(layout.shape):
        index = sum((coords[j] * (strides[j] // hstride[d]) for j in range(len(owners)) if owners[j] == d),
                    np.zeros(coords.shape[1], np.int64))
        valid &= index < size
        piece = (-(-size // eps) // slices[d]) * eps if d == stick_dim else size // slices[d]
        core += (index // piece) * weight
        weight *= slices[d]
    runs: dict[int, Runs] = {}
    for c in range(weight):
        ids = np.flatnonzero(valid & (core == c))
        if ids.size:
            breaks = np.flatnonzero(np.diff(ids) != 1) + 1
            runs[c] = [(int(r[0]), len(r)) for r in np.split(ids, breaks)]
    return runs
