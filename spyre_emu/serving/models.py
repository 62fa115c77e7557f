"""The models a serving run can price: a decoder's dimensions, from which the front end builds it
and from which the KV cache's capacity follows. No torch here (the front end builds the modules).

Presets are the published configs (Hugging Face ``config.json``) of the two models
sendnn-inference documents as supported; a ``module:attr`` model brings its own figures.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ConfigError

DTYPE_BYTES = 2  # fp16 weights and KV cache, as the front end compiles them


@dataclass(frozen=True)
class ModelSpec:
    """A decoder: embedding, ``layers`` × (RMSNorm, GQA attention with RoPE, RMSNorm, SwiGLU), a final
    norm and the LM head. ``residual_multiplier`` is Granite's scale on each residual branch (1.0: none)."""

    name: str
    layers: int
    dim: int
    heads: int
    kv_heads: int
    hidden: int
    vocab: int
    tied_embeddings: bool
    residual_multiplier: float = 1.0

    @property
    def head_dim(self) -> int:
        return self.dim // self.heads

    def weight_bytes(self) -> int:
        """Every parameter in fp16: embedding (and LM head unless tied), attention, MLP, norms."""
        kv = self.kv_heads * self.head_dim
        layer = 2 * self.dim * self.dim + 2 * self.dim * kv + 3 * self.dim * self.hidden + 2 * self.dim
        head = 0 if self.tied_embeddings else self.vocab * self.dim
        return DTYPE_BYTES * (self.vocab * self.dim + head + self.layers * layer + self.dim)

    def kv_bytes_per_token(self) -> int:
        """Keys and values of every layer for one token."""
        return 2 * self.layers * self.kv_heads * self.head_dim * DTYPE_BYTES


PRESETS = {
    # huggingface.co/ibm-granite/granite-3.3-8b-instruct/blob/main/config.json
    "granite-3.3-8b": ModelSpec("granite-3.3-8b", layers=40, dim=4096, heads=32, kv_heads=8, hidden=12800,
                                vocab=49159, tied_embeddings=True, residual_multiplier=0.22),
    # huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json
    "llama-3.1-8b": ModelSpec("llama-3.1-8b", layers=32, dim=4096, heads=32, kv_heads=8, hidden=14336,
                              vocab=128256, tied_embeddings=False),
}


def preset(name: str) -> ModelSpec:
    if name not in PRESETS:
        raise ConfigError(f"unknown model {name!r}; expected one of {', '.join(PRESETS)} or module:attr",
                          None, "--model")
    return PRESETS[name]


def kv_blocks(spec_weight_bytes: int, kv_bytes_per_token: int, card_bytes: int, block_tokens: int,
              cards: int = 1) -> int:
    """KV cache blocks ``cards`` cards hold once the weights are loaded (no activation reserve: assumed).
    Tensor parallel splits the weights and each token's keys and values evenly over the cards, so
    their memory adds up."""
    free = cards * card_bytes - spec_weight_bytes
    if free <= 0:
        raise ConfigError(f"the weights ({spec_weight_bytes:,} B) do not fit {cards} card(s) of {card_bytes:,} B",
                          None, "--model")
    return free // (kv_bytes_per_token * block_tokens)
