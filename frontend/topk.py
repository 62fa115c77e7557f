"""Pass 1's top-k on the card: k rounds of a row max, as a mixture-of-experts router needs.

Round r takes each row's largest value and its position, the lowest position holding it (torch
promises no order among ties): the min over the row of ``where(x == max, position, n)``. That position is then
masked with -inf for the next round. The rounds run in fp32, so positions are exact integers (below
2^24) and fp16 values exact; the indices are an int64 value carried in fp32 (``Value.carrier``), which
a cast to float32 reads as it is, and which int64 arithmetic reads on the host. The k columns are
assembled by ``where3`` over a constant one-hot column mask (no cat): 5 kernels a round, 2 k - 1 for the
columns of each result.
"""

from __future__ import annotations

import math

import torch

from .builder import Builder, UnsupportedError, cast, device
from .graph import Value

F32 = torch.float32


def topk(b: Builder, x: Value, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Value, Value]:
    device(x)
    last = len(x.shape) - 1
    if dim % len(x.shape) != last or not largest:
        raise UnsupportedError("a top-k other than of the largest along the last dim")
    n, rows = x.shape[-1], (*x.shape[:-1], 1)
    if n >= 2 ** 24:
        raise UnsupportedError("a top-k over more positions than fp32 counts exactly")
    work = cast(b, x, F32)
    lead = (1,) * last
    positions = b.value((*lead, n), F32, const=torch.arange(n, dtype=F32).reshape(*lead, n))
    tops, places = [], []
    for r in range(k):
        top = b.kernel("max", [work], rows, dims=(last,))
        hit = b.kernel("equal", [work, top], work.shape, torch.bool, F32)
        where = b.kernel("where3", [hit, positions, b.const(n, top)], work.shape, F32)
        place = b.kernel("min", [where], rows, dims=(last,))
        tops.append(top)
        places.append(place)
        if r + 1 < k:
            chosen = b.kernel("equal", [where, place], work.shape, torch.bool, F32)
            work = b.kernel("where3", [chosen, b.const(-math.inf, work), work], work.shape, F32)
    shape = tuple(b.fx.meta["val"][0].shape)
    values = cast(b, _columns(b, tops, shape, F32), x.dtype)
    return values, _columns(b, places, shape, torch.int64)


def _columns(b: Builder, parts: list[Value], shape: tuple[int, ...], dtype: torch.dtype) -> Value:
    """(..., 1) fp32 kernel results side by side as (..., k) of ``dtype`` (an integer dtype: carried in
    fp32): the last broadcast, the others placed by a one-hot column mask."""
    k, lead = len(parts), (1,) * (len(shape) - 1)
    out = b.kernel("identity", [parts[-1]], shape, F32) if k > 1 else parts[0]
    for r in range(k - 1):
        column = b.value((*lead, k), torch.bool, const=(torch.arange(k) == r).reshape(*lead, k))
        column.carrier = F32
        out = b.kernel("where3", [column, parts[r], out], shape, F32)
    if dtype != F32:  # a fresh kernel result, read by nothing else
        out.dtype, out.carrier = dtype, F32
    return out
