"""The ATen decompositions the backend traces with: Core ATen; attention, 2-D convolution (a matmul)
and batch norm in eval mode (a multiply-add) spelled in the card's ops.

torch picks a fused scaled_dot_product_attention kernel by device before ATen decompositions
apply (``_scaled_dot_product_flash_attention_for_cpu`` on the CPU, a float32 math path on meta
tensors). ``rewrite_attention`` replaces the call in Dynamo's graph by ``attention``, which
is what the card runs, in the inputs' dtype: a batched matmul, a scale, an additive mask, a
softmax over the last dim (safe: a row that sees no key gives 0, as in torch), and a second
batched matmul; grouped-query attention stacks each key/value head's group of query heads when the
query is short, else repeats the key/value heads.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch
from torch._decomp import core_aten_decompositions

from . import kernel_ops

aten = torch.ops.aten


@torch.library.custom_op("spyre_emu::patches", mutates_args=())
def patches(x: torch.Tensor, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
            pad: float, flat: bool) -> torch.Tensor:
    """A channels-last image's windows as rows, the card's ``patches`` kernel (kernel_ops.patches): (rows,
    KH·KW, C), or (rows, KH·KW·C) when ``flat`` (a matmul's operand)."""
    out = kernel_ops.patches(x, kernel=kernel, stride=stride, padding=padding, dilation=dilation, pad=pad)
    return out.reshape(out.shape[0], -1) if flat else out


@patches.register_fake
def _patches_shape(x: torch.Tensor, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
                   pad: float, flat: bool) -> torch.Tensor:
    n, h, w, c = x.shape
    oh, ow = _out_size((h, w), kernel, stride, padding, dilation)
    shape = (n * oh * ow, kernel[0] * kernel[1] * c) if flat else (n * oh * ow, kernel[0] * kernel[1], c)
    return x.new_empty(shape)


def _out_size(size: tuple[int, int], kernel: list[int], stride: list[int], padding: list[int],
              dilation: list[int]) -> list[int]:
    """A window's output height and width (torch's rule, without ceil_mode)."""
    return [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(size, kernel, stride, padding, dilation,
                                                                            strict=True)]


def _channel_sticks(x: torch.Tensor) -> bool:
    """The channels fill whole 128-byte sticks, so channels-last windows are gathers of whole sticks."""
    return x.shape[1] % (128 // x.element_size()) == 0


def attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None = None,
              dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    """scaled_dot_product_attention for inference (dropout does not apply), in the card's ops.

    Grouped-query attention with a short query (decode: fewer rows than a PT pass takes) stacks
    the query heads of a group (heads kv * groups ... kv * groups + groups - 1) along the rows of
    one batched matmul, a reshape that keeps the element order: each key/value head is read once
    and the PT passes fill up. A long query (prefill) fills the passes already; each key/value
    head is repeated for its group instead, which the card's batched matmuls run faster.
    """
    *lead, heads, rows, dim = query.shape
    kv_heads, cols = key.shape[-3], key.shape[-2]
    groups = heads // kv_heads
    scale = scale if scale is not None else 1.0 / math.sqrt(dim)
    keys = key.transpose(-2, -1)  # before any repeat: the card transposes each head once
    if groups > 1 and rows >= PT_ROWS:
        keys, value = keys.repeat_interleave(groups, dim=-3), value.repeat_interleave(groups, dim=-3)
        kv_heads, groups = heads, 1
    q = query.reshape(*lead, kv_heads, groups * rows, dim)
    scores = torch.matmul(q, keys) * scale
    if is_causal:
        attn_mask = torch.ones(rows, cols, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        scores = scores + _grouped_mask(attn_mask, query.dtype, heads, groups)
    out = torch.matmul(aten._safe_softmax(scores, -1), value)  # a fully masked row gives 0, as torch's does
    return out.reshape(*lead, heads, rows, dim)


def _grouped_mask(mask: torch.Tensor, dtype: torch.dtype, heads: int, groups: int) -> torch.Tensor:
    """An additive mask over (..., heads or 1, rows, cols) as (..., kv heads or 1, groups * rows, cols)."""
    if mask.dtype == torch.bool:
        mask = torch.zeros((), dtype=dtype, device=mask.device).where(mask, -math.inf)  # a where3 kernel
    rows, cols = mask.shape[-2:]
    if mask.dim() >= 3 and mask.shape[-3] == heads:
        return mask.reshape(*mask.shape[:-3], heads // groups, groups * rows, cols)
    if groups == 1:
        return mask
    lead = mask.shape[:-2]
    return mask.unsqueeze(-3).expand(*lead, groups, rows, cols).reshape(*lead, groups * rows, cols)


PT_ROWS = 8  # rows a PT pass multiplies at once

SDPA = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


def rewrite_attention(gm: torch.fx.GraphModule) -> None:
    """Dynamo's graph calls ``attention`` where the model calls scaled_dot_product_attention, in the
    graph and in the subgraphs of its repeated regions (subgraphs.py)."""
    for sub in gm.modules():
        if isinstance(sub, torch.fx.GraphModule):
            for node in sub.graph.nodes:
                if node.op == "call_function" and node.target in SDPA:
                    node.target = attention
            sub.recompile()


# silu: its decomposition computes fp16 in float32, and the card has a silu kernel; _safe_softmax: the
# card's softmax kernel has a safe variant
KEPT = (aten.silu.default, aten._safe_softmax.default)


def conv_as_matmul(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: list[int],
                   padding: list[int], dilation: list[int], transposed: bool, output_padding: list[int],
                   groups: int) -> Any:
    """A 2-D convolution as the card runs it, a matmul: the input's patches as columns (a view when
    the kernel tiles the image, as a ViT's patch embedding does; else ``unfold``, which runs on the
    host) times the weight as a (out channels, in channels x kernel) matrix. Others stay as they are."""
    if transposed or groups != 1 or x.dim() != 4:
        return NotImplemented
    n, cin, h, w = x.shape
    cout, _, kh, kw = weight.shape
    oh = (h + 2 * padding[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (w + 2 * padding[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    if list(stride) == [kh, kw] and not any(padding) and list(dilation) == [1, 1] and h % kh == 0 and w % kw == 0:
        cols = x.reshape(n, cin, oh, kh, ow, kw).permute(0, 1, 3, 5, 2, 4).reshape(n, cin * kh * kw, oh * ow)
    elif _channel_sticks(x):  # the card gathers channels-last windows: rows (i, j, c) of the weight to match
        cols = patches(x.permute(0, 2, 3, 1), [kh, kw], list(stride), list(padding), list(dilation), 0.0, True)
        rows = torch.matmul(cols, weight.permute(2, 3, 1, 0).reshape(-1, cout))
        out = rows.reshape(n, oh, ow, cout).permute(0, 3, 1, 2)
        return out if bias is None else out + bias.reshape(1, cout, 1, 1)
    else:  # gathered on the host; the result channels-last as well, as the convolutions after it give theirs
        cols = torch.nn.functional.unfold(x, (kh, kw), dilation=dilation, padding=padding, stride=stride)
        rows = torch.matmul(cols.transpose(1, 2), weight.reshape(cout, -1).t())
        out = rows.reshape(n, oh, ow, cout).permute(0, 3, 1, 2)
        return out if bias is None else out + bias.reshape(1, cout, 1, 1)
    out = torch.matmul(weight.reshape(cout, -1), cols).reshape(n, cout, oh, ow)
    return out if bias is None else out + bias.reshape(1, cout, 1, 1)


def batch_norm_eval(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, mean: torch.Tensor,
                    var: torch.Tensor, momentum: float, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Batch norm with running statistics: a per-channel multiply-add over the input, the factors computed
    over the channels alone (a vector, which the card reads in the input's order, whichever it is)."""
    scale = torch.rsqrt(var + eps)
    scale = scale if weight is None else scale * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    shape = (1, -1, *([1] * (x.dim() - 2)))
    return x * scale.reshape(shape) + shift.reshape(shape), mean.new_empty(0), mean.new_empty(0)


def max_pool_2d(x: torch.Tensor, kernel_size: list[int], stride: list[int] | None = None, padding: Any = 0,
                dilation: Any = 1, ceil_mode: bool = False) -> Any:
    """Max pooling as the card runs it: the channels-last windows (padded with the dtype's lowest value)
    and their max. Its indices are not computed (inference graphs do not read them)."""
    if ceil_mode or x.dim() != 4 or not _channel_sticks(x):
        return NotImplemented
    pair = lambda v: list(v) * (2 // len(v)) if isinstance(v, (list, tuple)) else [v, v]  # noqa: E731
    k, d, p = pair(kernel_size), pair(dilation), pair(padding)
    s = pair(stride) if stride else k
    rows = patches(x.permute(0, 2, 3, 1), k, s, p, d, torch.finfo(x.dtype).min, False).amax(1)
    n, c, h, w = x.shape
    rows = rows.reshape(n, *_out_size((h, w), k, s, p, d), c)
    return rows.permute(0, 3, 1, 2), x.new_empty(0, dtype=torch.int64)


@functools.cache
def decompositions() -> dict[Any, Any]:
    """The table every trace uses, built once per process (about 0.25 s a build, which every
    recompile of a generation's next length paid); shared, so callers do not modify it (make_fx and
    aot_autograd copy it)."""
    return {**{op: fn for op, fn in core_aten_decompositions().items() if op not in KEPT},
            aten.convolution.default: conv_as_matmul,
            aten._native_batch_norm_legit_no_training.default: batch_norm_eval,
            aten.max_pool2d_with_indices.default: max_pool_2d}
