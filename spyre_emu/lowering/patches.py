"""patches: the windows of a channels-last image as rows, DRAM to DRAM, DMA only.

spyre-emu's op for convolution and pooling on the card: x is an (N, H, W, C) image (``image`` gives
N, H, W; x may have any shape ending in C, the stick dim, whole sticks), y is (N·OH·OW, KH·KW, C)
in any shape ending in C or KH·KW·C,
y[(n, oh, ow), (i, j), c] = x[n, oh·sh + i·dh − ph, ow·sw + j·dw − pw, c], and ``pad`` (an attribute)
where that position is outside the image. Each output stick is one input stick lane for lane, or a
stick of ``pad``: a gather of whole sticks (as restickify's), the padding loaded from a constant
buffer of ``pad`` sticks. The convolution is then a matmul of y by the weight as a matrix; a max pool
is y's max over its middle dim.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor, dim_map, elems_per_stick
from ..kernel_program.model import Kernel
from .placement import check_division, core_runs, division, run_ids, stick_hosts, stick_of
from .restickify import moves
from .streams import CoreStreams, Emit, Item
from .target import Stepper, Target

PAD_STICKS = 16  # sticks of the pad constant: a run of padding sticks is loaded from it in pieces of at most this


def pad_buffer(kernel: Kernel) -> str:
    return f"{kernel.name}_pad"


def pad_constants(program: KernelProgram) -> dict[str, dict[str, Any]]:
    """Per patches kernel, a DRAM buffer of ``pad`` sticks."""
    return {pad_buffer(k): {"bytes": PAD_STICKS * STICK_BYTES, "dtype": program.tensors[k.inputs[0]].layout.dtype,
                            "fill": float(k.attrs.get("pad", 0.0))}
            for k in program.kernels if k.op == "patches"}


def lower_patches(core: CoreStreams, *, x: str, y: str, pad: str, pairs: np.ndarray, budget: int,
                  step: Stepper) -> None:
    """``pairs[:, j]`` = (input stick or -1 for padding, output stick) of the core's j-th output stick."""
    per_set = step(pairs.shape[1], budget // 2)
    for q, start in enumerate(range(0, pairs.shape[1], per_set)):
        at = (q % 2) * per_set * STICK_BYTES
        part = pairs[:, start:start + per_set]
        loads = moves(core, "load", x, part[0], at) + _pads(core, pad, part[0] < 0, at)
        stores = moves(core, "store", y, part[1], at)
        loads[-1].setdefault("signal", []).append(f"{core.tag}q{q}.loaded")
        stores[0].setdefault("wait", []).append(f"{core.tag}q{q}.loaded")
        core.wire_chunk(q, loads, {}, stores)


def _pads(core: CoreStreams, pad: str, slots: np.ndarray, lx: int) -> list[Item]:
    """Loads of the pad constant into the flagged LX slots, runs of at most PAD_STICKS sticks."""
    items: list[Item] = []
    at = np.flatnonzero(slots)
    for run in np.split(at, np.flatnonzero(np.diff(at) != 1) + 1) if at.size else []:
        for first in range(0, len(run), PAD_STICKS):
            n = min(PAD_STICKS, len(run) - first)
            items.append(core.add("load", {"op": "load", "dram": f"{pad}+0", "lx": lx + int(run[first]) * STICK_BYTES,
                                           "bytes": n * STICK_BYTES}))
    return items


def _geometry(kernel: Kernel, where: tuple[str, str]) -> tuple[list[int], ...]:
    """(image, kernel, stride, padding, dilation) and the output's (OH, OW), from the attributes."""
    a = kernel.attrs
    image, k, s, p, d = (list(a[f]) for f in ("image", "kernel", "stride", "padding", "dilation"))
    out = [(image[1 + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1) // s[i] + 1 for i in range(2)] if len(image) == 3 else []
    if (len(image) != 3 or min(image) < 1 or any(len(v) != 2 or min(v) < (0 if v is p else 1) for v in (k, s, p, d))
            or min(out) < 1):
        raise ProgramError(f"image (N, H, W) and kernel, stride, padding, dilation (two each; sizes >= 1, padding "
                           f">= 0) giving an output of at least 1 x 1: {image}, {k}, {s}, {p}, {d}", where[0],
                           where[1] + ".attrs")
    return image, k, s, p, d, out


def plan_patches(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    src, where = target.program.source, kernel.path
    x, y = (t.layout for t in tensors)
    (n, height, width), k, s, p, d, out = _geometry(kernel, (src, where))
    c, lanes = x.shape[-1], elems_per_stick(x.dtype)
    rows, kk = n * out[0] * out[1], k[0] * k[1]
    if (math.prod(x.shape) != n * height * width * c or math.prod(y.shape) != rows * kk * c
            or y.shape[-1] not in (c, kk * c) or y.dtype != x.dtype or c % lanes
            or dim_map(x)[-1] != len(x.shape) - 1 or dim_map(y)[-1] != len(y.shape) - 1):
        raise ProgramError(f"patches reads the (N, H, W, C) image {[n, height, width, c]} and gives ({rows}, {kk}, "
                           f"{c}) in x's dtype, each in any shape ending in C (y: or {kk * c}), C whole sticks and the "
                           f"stick dim: x {list(x.shape)}, y {list(y.shape)} {y.dtype}", src, where)
    div = division(kernel)
    check_division(y, div, src, where + ".work_division")
    host, _ = stick_hosts(y)
    flat = np.ravel_multi_index(tuple(host), y.shape, mode="clip")  # padding-only sticks: nobody's
    r, q = np.divmod(flat, kk * c)
    (i, j), ch = np.divmod(q // c, k[1]), q % c
    b, oh, ow = np.unravel_index(r, (n, *out))
    h, w = oh * s[0] + i * d[0] - p[0], ow * s[1] + j * d[1] - p[1]
    inside = (h >= 0) & (h < height) & (w >= 0) & (w < width)
    at = ((b * height + np.where(inside, h, 0)) * width + np.where(inside, w, 0)) * c + ch  # x's element, row-major
    source = np.where(inside, stick_of(x, np.stack(np.unravel_index(at, x.shape))), -1)
    shares = {}
    for core, runs in core_runs(y, div).items():
        ids = run_ids(runs)
        shares[core] = partial(lower_patches, x=tensors[0].name, y=tensors[1].name, pad=pad_buffer(kernel),
                               pairs=np.stack([source[ids], ids]), budget=target.budget, step=target.stepper(kernel))
    return shares

