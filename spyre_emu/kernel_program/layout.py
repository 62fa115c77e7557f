"""SpyreTensorLayout: where each element of a host tensor sits in device memory, stick by stick.

A device tensor is a row-major array of shape ``device_size`` whose last dim is one 128 B stick
(64 fp16/bf16, 32 fp32/int32, 128 fp8/int8 elements). ``stride_map[j]`` is the number of host
elements (row-major offsets in the contiguous host tensor) that one step along device dim ``j``
advances, so a data position at device coordinate ``c`` holds host element ``dot(c, stride_map)``.
``-1`` marks a device dim that steps no host dim (a host dim of size 1, a sparse stick): only its
index 0 holds data; a device dim of size 1 steps nothing whatever its stride. One host dim may be
split over several device dims (tiling): their strides chain like the digits of a number, and
device positions whose digits reach past the host size are padding, zero on the device.

The default layout, for host dims ``dim_order`` (``0..n-1`` unless given; the last entry is the
stick dim): device dims are ``dim_order[1:]``, then ``dim_order[0]``, then the stick elements, so
the first host dim lands just outside the stick and the stick dim appears twice, as a count of
sticks (its size padded to whole sticks) and as the elements of one stick. Host dims of size 1
step nothing (stride -1). A (5, 100, 150) fp16 tensor gets device_size [100, 3, 5, 64] and
stride_map [150, 64, 15000, 1].

Sources: https://github.com/torch-spyre/torch-spyre, ``docs/TensorLayouts.md`` (stride_map,
the published examples) and ``torch_spyre/csrc/spyre_tensor_impl.cpp`` (``SpyreTensorLayout::init``).
``dim_map`` is derived here from the strides; torch-spyre's older ``dim_map`` field also named the
host dim of device dims of size 1. Not modelled yet: non-contiguous host strides, element
arrangements within a stick, sparse ``dim_order`` (ending in -1).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..config import DTYPE_BYTES, STICK_BYTES
from ..errors import ProgramError, SpyreEmuError
from ..numerics import numpy_dtype

NO_HOST_DIM = -1  # a stride_map (and dim_map) entry for a device dim that steps no host dim


@dataclass(frozen=True)
class TensorLayout:
    """A host tensor (shape, dtype) and its device layout; check it with ``check_layout``."""

    shape: tuple[int, ...]
    dtype: str
    device_size: tuple[int, ...]
    stride_map: tuple[int, ...]

    def __post_init__(self) -> None:
        # JSON gives lists; tuples keep the layout hashable and comparable.
        for name in ("shape", "device_size", "stride_map"):
            object.__setattr__(self, name, tuple(int(v) for v in getattr(self, name)))


def elems_per_stick(dtype: str) -> int:
    return STICK_BYTES // DTYPE_BYTES[dtype]


def host_strides(shape: Sequence[int]) -> tuple[int, ...]:
    """Element strides of the contiguous (row-major) host tensor."""
    return tuple(math.prod(shape[d + 1:]) for d in range(len(shape)))


def default_layout(shape: Sequence[int], dtype: str, dim_order: Sequence[int] | None = None, *,
                   file: str | None = None, path: str | None = None) -> TensorLayout:
    """torch-spyre's layout for ``shape``: ``dim_order`` lists host dims outer to inner, stick dim last."""
    shape = tuple(int(n) for n in shape)
    order = tuple(range(len(shape))) if dim_order is None else tuple(int(d) for d in dim_order)
    problem = _host_problem(shape, dtype) or _order_problem(order, len(shape))
    if problem:
        raise ProgramError(problem, file, path)
    per_stick = elems_per_stick(dtype)
    if not shape:  # a scalar: one stick holding one element
        return TensorLayout(shape, dtype, (1, per_stick), (NO_HOST_DIM, NO_HOST_DIM))
    stick_dim = order[-1]
    dims = (*order[1:], order[0], stick_dim)
    sticks = -(-shape[stick_dim] // per_stick)  # the stick dim padded to whole sticks
    sizes = [sticks if d == stick_dim else shape[d] for d in dims[:-1]] + [per_stick]
    return TensorLayout(shape, dtype, tuple(sizes), _default_strides(shape, dims, sizes))


def _default_strides(shape: tuple[int, ...], dims: tuple[int, ...], sizes: list[int]) -> tuple[int, ...]:
    """Inner device dims first: a host dim's finest device dim steps its host stride, the next
    one steps over the finer one.

    The step is capped at the host dim's extent, as torch-spyre does: the cap only changes device
    dims of size 1, whose stride nothing reads, and keeps our numbers equal to torch-spyre's.
    """
    strides = host_strides(shape)
    step = list(strides)
    out = [NO_HOST_DIM] * len(dims)
    for j in reversed(range(len(dims))):
        d = dims[j]
        if shape[d] > 1:
            out[j] = step[d]
            step[d] = min(step[d] * sizes[j], strides[d] * shape[d])
    return tuple(out)


def _host_problem(shape: tuple[int, ...], dtype: str) -> str | None:
    if dtype not in DTYPE_BYTES:
        return f"unknown dtype {dtype!r}; expected one of {sorted(DTYPE_BYTES)}"
    if any(n < 1 for n in shape):
        return f"host shape {list(shape)} has a dim smaller than 1"
    return None


def _order_problem(order: tuple[int, ...], rank: int) -> str | None:
    if sorted(order) != list(range(rank)):
        return f"dim_order {list(order)} is not a permutation of the {rank} host dims"
    return None


def check_layout(layout: TensorLayout, *, file: str | None = None, path: str | None = None) -> None:
    """Reject a layout that does not place every host element at exactly one device position."""
    problem = _layout_problem(layout)
    if problem:
        raise ProgramError(problem, file, path)


def _layout_problem(layout: TensorLayout) -> str | None:
    problem = _host_problem(layout.shape, layout.dtype)
    if problem:
        return problem
    sizes, strides = layout.device_size, layout.stride_map
    if not sizes or len(sizes) != len(strides):
        return f"device_size {list(sizes)} and stride_map {list(strides)} must be non-empty and of equal length"
    if any(n < 1 for n in sizes):
        return f"device_size {list(sizes)} has a dim smaller than 1"
    if sizes[-1] != elems_per_stick(layout.dtype):
        return (f"the last device dim is one stick of {elems_per_stick(layout.dtype)} {layout.dtype} elements, "
                f"not {sizes[-1]}")
    if any(s < 1 and s != NO_HOST_DIM for s in strides):
        return f"stride_map {list(strides)} has an entry that is neither positive nor {NO_HOST_DIM}"
    owners = _owners(layout)
    for j, owner in enumerate(owners):
        if owner is None:
            return f"device dim {j}: stride {strides[j]} steps no host dim of shape {list(layout.shape)}"
    return _tiling_problem(layout, owners)


def _owners(layout: TensorLayout) -> list[int | None]:
    """The host dim each device dim steps (-1: none; None: a stride that fits no host dim).

    Host strides are contiguous, so host dim d owns the strides that are multiples of its own
    stride and smaller than its extent; these ranges do not overlap.
    """
    strides = host_strides(layout.shape)
    owners: list[int | None] = []
    for size, step in zip(layout.device_size, layout.stride_map, strict=True):
        if size == 1 or step == NO_HOST_DIM:
            owners.append(NO_HOST_DIM)
            continue
        fits = [d for d, (n, s) in enumerate(zip(layout.shape, strides, strict=True))
                if n > 1 and s <= step < s * n and step % s == 0]
        owners.append(fits[0] if fits else None)
    return owners


def _tiling_problem(layout: TensorLayout, owners: list[int | None]) -> str | None:
    """Each host dim must be split into device dims like digits: no gaps, no overlaps, enough reach."""
    strides = host_strides(layout.shape)
    for d, extent in enumerate(layout.shape):
        digits = sorted((layout.stride_map[j] // strides[d], j) for j, o in enumerate(owners) if o == d)
        if extent > 1 and not digits:
            return f"host dim {d} (size {extent}) is stepped by no device dim"
        reach = 1
        for factor, j in digits:
            if factor != reach:
                return (f"device dim {j} steps host dim {d} by {factor} elements where {reach} is needed: "
                        f"its device dims overlap or leave gaps")
            reach *= layout.device_size[j]
        if reach < extent:
            return f"the device dims of host dim {d} reach {reach} of its {extent} elements"
    return None


@cache  # the lowering asks for it per run of sticks
def dim_map(layout: TensorLayout) -> tuple[int, ...]:
    """The host dim each device dim steps, -1 where none (stride -1 or size 1): (1, 2, 0, 2) for
    the (5, 100, 150) example."""
    check_layout(layout)
    return tuple(o for o in _owners(layout) if o is not None)  # checked: every stride fits


def device_bytes(layout: TensorLayout) -> int:
    """Bytes of the device image: whole sticks, padding included."""
    check_layout(layout)
    return math.prod(layout.device_size) * DTYPE_BYTES[layout.dtype]


def to_device(array: np.ndarray, layout: TensorLayout) -> np.ndarray:
    """The device byte image (uint8) of a host array; padding is zero.

    Any numpy dtype of the right element width is accepted (bf16 as uint16, fp8 as uint8): the
    layout moves elements, it does not convert them.
    """
    check_layout(layout)
    array = np.asarray(array)
    if array.shape != layout.shape:
        raise SpyreEmuError(f"host array has shape {list(array.shape)}, the layout {list(layout.shape)}")
    if array.dtype.itemsize != DTYPE_BYTES[layout.dtype]:
        raise SpyreEmuError(f"host array has {array.dtype.itemsize} B elements, {layout.dtype} needs "
                            f"{DTYPE_BYTES[layout.dtype]} B")
    padded_shape, split, order, data = _plan(layout)
    padded = np.zeros(padded_shape, array.dtype)
    padded[tuple(slice(0, n) for n in layout.shape)] = array
    image = np.zeros(layout.device_size, array.dtype)
    image[data] = padded.reshape(split).transpose(np.argsort(order))
    return image.reshape(-1).view(np.uint8)


def from_device(raw: bytes | np.ndarray, layout: TensorLayout) -> np.ndarray:
    """The host array held in a device byte image (bytes or a contiguous array), in the numpy
    dtype of ``layout.dtype`` (bf16 as uint16, fp8 as uint8)."""
    data_bytes = np.frombuffer(raw, np.uint8)
    if data_bytes.size != device_bytes(layout):  # checks the layout too
        raise SpyreEmuError(f"device image has {data_bytes.size} B, the layout {device_bytes(layout)} B")
    padded_shape, _, order, data = _plan(layout)
    image = data_bytes.view(_host_numpy(layout.dtype)).reshape(layout.device_size)
    padded = image[data].transpose(order).reshape(padded_shape)
    return padded[tuple(slice(0, n) for n in layout.shape)].copy()  # never a view of ``raw``


def _plan(layout: TensorLayout) -> tuple[tuple[int, ...], list[int], list[int], tuple[slice, ...]]:
    """How a padded host array becomes the device array by one reshape and one transpose.

    Returns the padded host shape, its split into device dims (host dim by host dim, coarse
    first, then the dims stepping no host dim as size 1), the device dim of each split axis, and
    the slice of the device array that holds data (index 0 of dims stepping no host dim).
    """
    owners = dim_map(layout)
    order = sorted(range(len(owners)),
                   key=lambda j: (owners[j] == NO_HOST_DIM, owners[j], -layout.stride_map[j]))
    split = [layout.device_size[j] if owners[j] != NO_HOST_DIM else 1 for j in order]
    padded_shape = tuple(math.prod(layout.device_size[j] for j, o in enumerate(owners) if o == d)
                         for d in range(len(layout.shape)))
    data = tuple(slice(0, 1) if o == NO_HOST_DIM else slice(None) for o in owners)
    return padded_shape, split, order, data


def _host_numpy(dtype: str) -> type:
    """numerics' numpy dtype; fp8 stays raw bits (numpy has no fp8)."""
    return np.uint8 if dtype == "fp8" else numpy_dtype(dtype)
