"""Casts (``to_dtype``) between fp16 or bf16 and fp32: a pointwise kernel whose sticks change width.

A 128 B stick holds 64 fp16 or 32 fp32 elements, so widening turns each input stick into two
output sticks (``widen_lo``, ``widen_hi``: its low and high half) and narrowing two input sticks
into one (``narrow``). Each output stick reads the input stick holding its first element; a
narrowed stick also reads the next one along the stick dim, or the same one again when the row
ends there (its upper lanes are padding). The sticks then stream through the SFUs as any
pointwise kernel's do.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..config import DTYPE_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, TensorLayout, dim_map, elems_per_stick
from ..kernel_program.layout import NO_HOST_DIM
from ..kernel_program.model import Kernel
from .placement import check_division, core_runs, division, run_ids, stick_hosts, stick_of
from .pointwise import Operand, lower_pointwise
from .streams import Emit
from .target import Target

WIDEN = ((("widen_lo", (0,)),), (("widen_hi", (0,)),))
NARROW = ((("narrow", (0, 1)),),)


def plan_cast(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a cast kernel and return each core's share of it."""
    x, y = (t.layout for t in tensors)
    src = target.program.source
    _check(kernel, x.shape, y.shape, (x.dtype, y.dtype), dim_map(x)[-1] == dim_map(y)[-1], src)
    div = division(kernel)
    check_division(y, div, src, kernel.path + ".work_division")
    host, stick_dim = stick_hosts(y)[0], dim_map(y)[-1]
    widen = DTYPE_BYTES[y.dtype] > DTYPE_BYTES[x.dtype]
    shares = {}
    for core, runs in core_runs(y, div).items():
        ids = run_ids(runs)
        first = host[:, ids]
        sticks = [stick_of(x, first)] + ([] if widen else [_next_stick(x, first, stick_dim)])
        inputs = [Operand(tensors[0].name, s, False, target.residents.get(tensors[0].name), False) for s in sticks]
        half = _half(first, stick_dim, elems_per_stick(x.dtype)) if widen else None
        shares[core] = partial(lower_pointwise, steps=WIDEN if widen else NARROW, inputs=inputs,
                               output=tensors[1].name, runs=runs, out_home=target.residents.get(tensors[1].name),
                               budget=target.budget, step=target.streaming_stepper(kernel, tensors), dtype=x.dtype,
                               where=(src, kernel.path), variant=half, out_dtype=y.dtype)
    return shares


def _half(first: np.ndarray, stick_dim: int, lanes: int) -> np.ndarray:
    """0 where an output stick widens its input stick's low half, 1 for the high half."""
    if stick_dim == NO_HOST_DIM:  # one element per stick
        return np.zeros(first.shape[1], np.int64)
    return (first[stick_dim] % lanes) // (lanes // 2)


def _next_stick(x: TensorLayout, first: np.ndarray, stick_dim: int) -> np.ndarray:
    """The input stick after the one holding ``first`` along the stick dim, or that same stick where
    the row ends (the narrowed stick's upper lanes are then padding)."""
    if stick_dim == NO_HOST_DIM:
        return stick_of(x, first)
    after = first.copy()
    after[stick_dim] += elems_per_stick(x.dtype)
    after[stick_dim] = np.where(after[stick_dim] < x.shape[stick_dim], after[stick_dim], first[stick_dim])
    return stick_of(x, after)


def _check(kernel: Kernel, x: tuple[int, ...], y: tuple[int, ...], dtypes: tuple[str, str], same_stick: bool,
           src: str) -> None:
    wide = {"fp32"}
    if x != y or list(kernel.dims.values()) != list(y) or not same_stick or \
            len({*dtypes} & wide) != 1 or not {*dtypes} - wide <= {"fp16", "bf16"} or len({*dtypes}) != 2:
        raise ProgramError(f"to_dtype casts between fp16 or bf16 and fp32 over the output's dims, x and y of one "
                           f"shape and stick dim: x {list(x)} {dtypes[0]}, y {list(y)} {dtypes[1]}, dims "
                           f"{list(kernel.dims.values())}", src, kernel.path)
