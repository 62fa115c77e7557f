"""Hugging Face mixture-of-experts layers as the card runs them: every expert on every token.

transformers' default experts implementation (``grouped_mm``) sorts the (token, expert) pairs by expert,
counts them (``histc``, ``cumsum``) and multiplies each expert's group: shapes that depend on the data,
which a kernel program (static shapes) cannot have, so all of it ran on the CPU. A module compiled with
this backend runs its calls with the experts implementation ``"spyre_emu"`` (registered in transformers'
``ExpertsInterface``, set for the call and restored after; generate.py): with the router's top-k on
the card (topk.py), a comparison of each token's k expert indices with every expert's number spreads its
k weights over all E experts (0 for the others); the gate/up projection of every expert is one matmul
by their weights side by side (hidden × E·2M); the activation runs on every expert's part, each scaled
by its token's weight for that expert; the down projection is one matmul by the down weights stacked
(E·M × hidden), which also sums over the experts. No shape depends on the data; the experts' FLOPs are
E / k times a sparse dispatch's. torch-spyre's adapters run MoE differently (docs/models.md).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

import torch

IMPLEMENTATION = "spyre_emu"


def _moe() -> Any:
    """transformers' experts interface (transformers is already imported when a model has experts)."""
    return importlib.import_module("transformers.integrations.moe")


def dense_experts(self: Any, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                  top_k_weights: torch.Tensor) -> torch.Tensor:
    """transformers' experts forward ``(hidden_states (T, H), top_k_index (T, k), top_k_weights (T, k))
    -> (T, H)``, dense; experts of another form (biases, transposed or separate weights) as ``grouped_mm``."""
    if not self.has_gate or not self.is_concatenated or self.has_bias or self.is_transposed \
            or self.has_post_expert_norm or self._is_expert_parallel:
        return _moe().grouped_mm_experts_forward(self, hidden_states, top_k_index, top_k_weights)
    tokens, hidden = hidden_states.shape
    numbers = torch.arange(self.num_experts, dtype=torch.float32, device=hidden_states.device)
    chosen = top_k_index.float().unsqueeze(-1) == numbers  # (T, k, E): the indices are exact in fp32
    route = (chosen.to(top_k_weights.dtype) * top_k_weights.unsqueeze(-1)).sum(1)  # (T, E)
    gate_up = hidden_states @ self.gate_up_proj.reshape(-1, hidden).t()  # (T, E·2M)
    act = self._apply_gate(gate_up.view(tokens, self.num_experts, -1))  # (T, E, M)
    act = act * route.to(act.dtype).unsqueeze(-1)
    down = self.down_proj.transpose(1, 2).reshape(-1, hidden)  # (E·M, H)
    return (act.reshape(tokens, -1) @ down).to(hidden_states.dtype)


@contextlib.contextmanager
def on_card(module: torch.nn.Module) -> Iterator[None]:
    """``module``'s experts run as ``dense_experts`` inside the block, when it is a transformers model
    whose experts can switch implementation; anything else runs as it is."""
    can_switch = getattr(module, "_can_set_experts_implementation", None)
    if can_switch is None or not can_switch():
        yield
        return
    _moe().ALL_EXPERTS_FUNCTIONS.register(IMPLEMENTATION, dense_experts)
    before = module.get_experts_implementation()
    module.set_experts_implementation(IMPLEMENTATION)
    try:
        yield
    finally:
        module.set_experts_implementation(before)
