"""The ATen decompositions the backend traces with: Core ATen, and attention spelled in its ops.

torch picks a fused scaled_dot_product_attention kernel by device before ATen decompositions
apply (``_scaled_dot_product_flash_attention_for_cpu`` on the CPU, a float32 math path on meta
tensors). ``rewrite_attention`` replaces the call in Dynamo's graph by ``attention``, which
is what the card runs, in the inputs' dtype: a batched matmul, a scale, an additive mask, a
softmax over the last dim, and a second batched matmul; grouped-query attention repeats each
key/value head for its group of query heads.
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
    """scaled_dot_product_attention for inference (dropout does not apply), in the card's ops."""
    groups = query.shape[-3] // key.shape[-3]
    if groups > 1:
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        rows, cols = query.shape[-2], key.shape[-2]
        attn_mask = torch.ones(rows, cols, dtype=torch.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_mask = torch.zeros(attn_mask.shape, dtype=query.dtype, device=query.device).masked_fill(
                ~attn_mask, -math.inf)
        scores = scores + attn_mask
    return torch.matmul(torch.softmax(scores, dim=-1), value)


SDPA = (torch._C._nn.scaled_dot_product_attention, torch.nn.functional.scaled_dot_product_attention)


def rewrite_attention(gm: torch.fx.GraphModule) -> None:
    """Dynamo's graph calls ``attention`` where the model calls scaled_dot_product_attention."""
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target in SDPA:
            node.target = attention
    gm.recompile()


KEPT = (aten.silu.default,)  # its decomposition computes fp16 in float32; the card has a silu kernel


def decompositions() -> dict[Any, Any]:
    return {op: fn for op, fn in core_aten_decompositions().items() if op not in KEPT}
