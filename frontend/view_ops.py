"""Pass 1's view family: permutes and reshapes as views, slices as restickify kernels, cat kernels.

Permutes and reshapes move no data where they are made (the layout pass resolves them: free, or
restickified on the card). A slice, select, split or unbind of a value the card computed is a
``ReStickifyOpHBM`` kernel with a window (``slice`` attr: ((dim, start, stop),), transposed): along a
dim outside the stick, or along the stick dim from a stick boundary, a gather of whole sticks; from
inside a stick (an element offset the lanes would have to shift by) the window is transposed on the
way out, so the sliced dim becomes rows, and a permute view turns it back (the layout pass's
transpose). A slice of what the host holds (weights, inputs, a CPU fallback's result) stays a
host view. A cat of one value's (negated) slices along its last dim is a matmul by a constant
matrix (rotate_half); another cat of card values is a ``cat`` kernel, whole sticks moved by DMA
(along the last dim, parts of whole sticks; else on the host). An embedding of a table the card can
hold by integer indices from the host (token ids, positions) is an ``embedding`` kernel: indirect
loads, each reading the table row an int32 on the card names. Index with tensor indices stays on the
host.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .builder import Builder, UnsupportedError, device, host, out_shape, permuted, pt, view_of
from .graph import Value
from .layout import RESTICKIFY

aten = torch.ops.aten
VIEWS = {aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.clone, aten.alias,
         aten.expand, aten.permute, aten.slice, aten.select, aten.cat, aten.embedding, aten.index,
         aten.repeat, aten.split_with_sizes, aten.split, aten.unbind}
ORDER_KEEPING = (aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.clone, aten.alias)


def view(b: Builder, x: Value, *args: Any, **kwargs: Any) -> Value:
    """A view-family op with no handler of its own. Permutes and reshapes are resolved by the layout
    pass (on the card, or free); an expand that broadcasts is an ``identity`` kernel; the rest run on
    the host."""
    val, op = b.fx.meta["val"], b.fx.target.overloadpacket
    if not isinstance(val, torch.Tensor):
        raise UnsupportedError("a view with several results")
    if op is aten.expand and tuple(val.shape) != x.shape:
        device(x)
        return b.kernel("identity", [x], val.shape)
    if op is aten.permute:
        return permuted(b, x, tuple(d % len(x.shape) for d in args[0]))
    return host(b, "view", op.__name__, regroup=op in ORDER_KEEPING or op is aten.expand)


def lanes(dtype: torch.dtype) -> int:
    """Elements per 128-byte stick."""
    return 128 // torch.empty((), dtype=dtype).element_size()


def window(b: Builder, x: Value, dim: int, start: int, stop: int, shape: tuple[int, ...]) -> Value:
    """``x`` narrowed to ``start:stop`` along ``dim``, viewed as ``shape``: a restickify kernel."""
    if x not in b.computed:
        raise UnsupportedError("a slice of host data (input preparation)")
    device(x)
    rank, n = len(x.shape), x.shape[dim]
    if (start, stop) == (0, n):
        return view_of(b, x, shape)
    if dim != rank - 1 or start % lanes(x.dtype) == 0:
        part = b.kernel(RESTICKIFY, [x], (*x.shape[:dim], stop - start, *x.shape[dim + 1:]),
                        slice=(((dim, start, stop),), False))
        return view_of(b, part, shape)
    rows = math.prod(x.shape[:-1])
    turned = b.kernel(RESTICKIFY, [x], (stop - start, rows), slice=(((dim, start, stop),), True))
    return view_of(b, view_of(b, turned, (rows, stop - start), perm=(1, 0)), shape)


def _bounds(n: int, start: int | None, stop: int | None) -> tuple[int, int]:
    start, stop = (min(max(i + n if i < 0 else i, 0), n) for i in (start or 0, n if stop is None else stop))
    return start, max(start, stop)


def slice_(b: Builder, x: Value, dim: int = 0, start: int | None = None, end: int | None = None,
           step: int = 1) -> Value:
    if step != 1:
        raise UnsupportedError("a strided slice")
    dim %= len(x.shape)
    start, stop = _bounds(x.shape[dim], start, end)
    if stop == start:
        raise UnsupportedError("an empty slice")
    return window(b, x, dim, start, stop, out_shape(b))


def select(b: Builder, x: Value, dim: int, index: int) -> Value:
    dim %= len(x.shape)
    index %= x.shape[dim]
    return window(b, x, dim, index, index + 1, out_shape(b))


def split_with_sizes(b: Builder, x: Value, sizes: list[int], dim: int = 0) -> tuple[Value, ...]:
    dim %= len(x.shape)
    bounds = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    if 0 in sizes:
        raise UnsupportedError("a split with an empty part")
    shapes = [tuple(t.shape) for t in b.fx.meta["val"]]
    return tuple(window(b, x, dim, a, z, s) for a, z, s in zip(bounds[:-1], bounds[1:], shapes, strict=True))


def split(b: Builder, x: Value, size: int, dim: int = 0) -> tuple[Value, ...]:
    n = x.shape[dim % len(x.shape)]
    return split_with_sizes(b, x, [min(size, n - a) for a in range(0, n, size)], dim)


def unbind(b: Builder, x: Value, dim: int = 0) -> tuple[Value, ...]:
    dim %= len(x.shape)
    shape = x.shape[:dim] + x.shape[dim + 1:]
    return tuple(window(b, x, dim, i, i + 1, shape) for i in range(x.shape[dim]))


def embedding(b: Builder, weight: Value, indices: Value, *args: Any) -> Value:
    """Rows of ``weight`` picked by ``indices`` (any shape), as one ``embedding`` kernel over the
    indices flattened; the indices are host data (inputs, positions), copied in as int32."""
    device(weight)
    if len(weight.shape) != 2 or indices.dtype not in (torch.int64, torch.int32) or indices in b.computed:
        raise UnsupportedError("an embedding other than of a 2-D table by integer indices from the host")
    if weight.shape[0] > 2 ** 31:
        raise UnsupportedError("a table of more rows than int32 indices name")
    ids = view_of(b, indices, (math.prod(indices.shape),))
    rows = b.kernel("embedding", [weight, ids], (ids.shape[0], weight.shape[1]))
    return view_of(b, rows, out_shape(b))


def cat(b: Builder, parts: list[Value], dim: int = 0) -> Value:
    """A cat with one non-empty part (a DynamicCache's first step: an empty cache and the first keys)
    is that part. Copies of one value along its last dim (RoPE's cat((freqs, freqs))) are a broadcast
    (an identity kernel). A cat of one value's (negated) slices along its last dim, as rotate_half, is
    the value times a constant matrix of 0 and +-1 (exact), a matmul on the card instead of host data
    movement. Any other cat is a ``cat`` kernel (DMA only)."""
    kept = [(p, fx) for p, fx in zip(parts, b.fx.args[0], strict=True) if math.prod(p.shape)]
    if len(kept) == 1:
        return view_of(b, kept[0][0], out_shape(b))
    parts = [p for p, _ in kept]
    slices = [_signed_slice(fx) for _, fx in kept]
    dim %= len(parts[0].shape)
    if dim == len(parts[0].shape) - 1 and None not in slices and len({s[0] for s in slices}) == 1:
        return _rotated(b, b.env[slices[0][0]], slices)
    return _joined(b, parts, dim)


def _rotated(b: Builder, x: Value, slices: list[tuple[torch.fx.Node, int, int, float]]) -> Value:
    """Signed slices of ``x`` along its last dim side by side: a broadcast when they are copies of x, else
    x times a constant matrix."""
    device(x)
    n, m = x.shape[-1], sum(end - start for _, start, end, _ in slices)
    if all((start, end, sign) == (0, n, 1.0) for _, start, end, sign in slices):  # copies: a broadcast, any dtype
        once = view_of(b, x, (*x.shape[:-1], 1, n))
        return view_of(b, b.kernel("identity", [once], (*x.shape[:-1], len(slices), n)), out_shape(b))
    pt(x)
    matrix, at = torch.zeros(n, m, dtype=x.dtype), 0
    for _, start, end, sign in slices:
        matrix[torch.arange(start, end), torch.arange(at, at + end - start)] = sign
        at += end - start
    rows = view_of(b, x, (math.prod(x.shape[:-1]), n))
    out = b.kernel("batchmatmul", [rows, b.value((n, m), x.dtype, const=matrix)], (rows.shape[0], m))
    return view_of(b, out, out_shape(b))


def _joined(b: Builder, parts: list[Value], dim: int) -> Value:
    """A ``cat`` kernel when the card computed a part (host data is copied in for it, as for any kernel)
    and each output stick is one input stick: along the last dim, every part but the last whole sticks.
    A cat of host data alone is input preparation, on the host."""
    device(*parts)
    if not b.computed.intersection(parts):
        raise UnsupportedError("a cat of host data (input preparation)")
    if len({p.dtype for p in parts}) > 1:
        raise UnsupportedError("a cat of parts of different dtypes")
    if dim == len(parts[0].shape) - 1 and any(p.shape[-1] % lanes(p.dtype) for p in parts[:-1]):
        raise UnsupportedError("a cat along the last dim of parts not whole sticks (an output stick would take "
                               "lanes of two)")
    return b.kernel("cat", parts, out_shape(b), along=dim)


def _signed_slice(fx: torch.fx.Node) -> tuple[torch.fx.Node, int, int, float] | None:
    """(source, start, end, sign) of ``x[..., start:end]``, ``x`` itself, or their negation, along
    the last dim."""
    sign = 1.0
    if fx.target is aten.neg.default:
        sign, fx = -1.0, fx.args[0]
    if fx.target is not aten.slice.Tensor:
        return fx, 0, fx.meta["val"].shape[-1], sign
    src, dim, start, end, step = (*fx.args, *[None] * (5 - len(fx.args)))
    size = src.meta["val"].shape
    if (dim or 0) % len(size) != len(size) - 1 or step not in (None, 1):
        return None
    start, end = _bounds(size[-1], start, end)
    return src, start, end, sign


HANDLERS = {**dict.fromkeys(VIEWS, view), aten.slice: slice_, aten.select: select,
            aten.split_with_sizes: split_with_sizes, aten.split: split, aten.unbind: unbind, aten.cat: cat,
            aten.embedding: embedding}
