"""The ATen decompositions the backend traces with: Core ATen, and attention spelled in its ops.

torch picks a fused scaled_dot_product_attention kernel by device before ATen decompositions
apply (``_scaled_dot_product_flash_attention_for_cpu`` on the CPU, a float32 math path on meta
tensors). ``rewrite_attention`` replaces the call in Dynamo's graph by ``attention``, which
is what the card runs, in the inputs' dtype: a batched matmul, a scale, an additive mask, a
softmax over the last dim (safe: a row that sees no key gives 0, as in torch), and a second
batched matmul; grouped-query attention stacks each key/value head's group of query heads when the
query is short, else repeats the key/value heads.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._decomp import core_aten_decompositions

aten = torch.ops.aten


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
    """Dynamo's graph calls ``attention`` where the model calls scaled_dot_product_attention."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in SDPA:
            node.target = attention
    gm.recompile()


# silu: its decomposition computes fp16 in float32, and the card has a silu kernel; _safe_softmax: the
# card's softmax kernel has a safe variant
KEPT = (aten.silu.default, aten._safe_softmax.default)


def decompositions() -> dict[Any, Any]:
    return {op: fn for op, fn in core_aten_decompositions().items() if op not in KEPT}
