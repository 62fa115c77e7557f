"""The ATen decompositions the backend traces with: Core ATen, and attention spelled in its ops.

torch lowers scaled_dot_product_attention on the CPU to one fused op
(``_scaled_dot_product_flash_attention_for_cpu``) and its math fallback computes in float32.
Here it becomes what the card runs, in the inputs' dtype: a batched matmul, a scale, an additive
mask, a softmax over the last dim, and a second batched matmul; grouped-query attention repeats
each key/value head for its group of query heads.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch._decomp import core_aten_decompositions

aten = torch.ops.aten


def _attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, dropout_p: float = 0.0,
               is_causal: bool = False, *, attn_mask: torch.Tensor | None = None,
               scale: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    groups = query.shape[-3] // key.shape[-3]
    if groups > 1:
        key = key.repeat_interleave(groups, dim=-3)
        value = value.repeat_interleave(groups, dim=-3)
    scale = scale if scale is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        rows, cols = query.shape[-2], key.shape[-2]
        keep = torch.ones(rows, cols, dtype=torch.bool, device=query.device).tril()
        attn_mask = torch.zeros(rows, cols, dtype=query.dtype, device=query.device).masked_fill(~keep, -math.inf)
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            attn_mask = torch.zeros_like(attn_mask, dtype=query.dtype).masked_fill(~attn_mask, -math.inf)
        scores = scores + attn_mask
    probs = torch.softmax(scores, dim=-1)
    logsumexp = torch.zeros(query.shape[:-1], dtype=torch.float32, device=query.device)  # unused in inference
    return torch.matmul(probs, value), logsumexp


KEPT = (aten.silu.default,)  # its decomposition computes fp16 in float32; the card has a silu kernel


def decompositions() -> dict[Any, Any]:
    table = {op: fn for op, fn in core_aten_decompositions().items() if op not in KEPT}
    table[aten._scaled_dot_product_flash_attention_for_cpu.default] = _attention
    return table
