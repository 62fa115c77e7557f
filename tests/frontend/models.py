"""Small transformer blocks written in plain torch, for block tests and the Llama-3.1-8B layer run."""

from __future__ import annotations

import math

import torch
from torch import nn

F = nn.functional


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim) + 0.1 * torch.randn(dim)), eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class HFRMSNorm(RMSNorm):
    """RMS norm written as Hugging Face's Llama writes it: the statistics in float32."""

    def forward(self, x):
        dtype, x = x.dtype, x.to(torch.float32)
        var = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(var + self.eps)
        return self.weight * x.to(dtype)


class SwiGLU(nn.Module):
    def __init__(self, dim: int, hidden: int):
        super().__init__()
        self.gate, self.up = nn.Linear(dim, hidden, bias=False), nn.Linear(dim, hidden, bias=False)
        self.down = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos + rotated * sin


class Attention(nn.Module):
    """Multi-head (kv_heads == heads) or grouped-query attention through scaled_dot_product_attention."""

    def __init__(self, dim: int, heads: int, kv_heads: int, bias: bool = False, causal: bool = True):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim, self.causal = heads, kv_heads, dim // heads, causal
        self.q = nn.Linear(dim, dim, bias=bias)
        self.k = nn.Linear(dim, kv_heads * self.head_dim, bias=bias)
        self.v = nn.Linear(dim, kv_heads * self.head_dim, bias=bias)
        self.o = nn.Linear(dim, dim, bias=bias)

    def forward(self, x, rope=None, cache=None):
        """``cache``: (keys, values) of a static KV cache that already holds this step's slot (decode)."""
        b, s, _ = x.shape
        q = self.q(x).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(x).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        if rope is not None:
            q, k = rotate(q, *rope), rotate(k, *rope)
        keys, values = (k, v) if cache is None else cache
        out = F.scaled_dot_product_attention(q, keys, values, is_causal=self.causal and cache is None,
                                             enable_gqa=self.kv_heads != self.heads)
        return self.o(out.transpose(1, 2).reshape(b, s, -1)), k, v


class LlamaLayer(nn.Module):
    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int):
        super().__init__()
        self.norm1, self.norm2 = RMSNorm(dim), RMSNorm(dim)
        self.attn, self.mlp = Attention(dim, heads, kv_heads), SwiGLU(dim, hidden)

    def forward(self, x, cos, sin, cache_k=None, cache_v=None):
        """The layer's output and this step's keys and values (for the cache)."""
        cache = None if cache_k is None else (cache_k, cache_v)
        attn, k, v = self.attn(self.norm1(x), (cos, sin), cache)
        h = x + attn
        return h + self.mlp(self.norm2(h)), k, v


def rope(seq: int, head_dim: int, start: int = 0, dtype=torch.float16, device=None):
    inv = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=device).float() / head_dim))
    angles = torch.outer(torch.arange(start, start + seq, device=device).float(), inv)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.attn = Attention(dim, heads, heads, bias=True)
        self.fc, self.proj = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        h = x + self.attn(self.ln1(x))[0]
        return h + self.proj(gelu_new(self.fc(self.ln2(h))))


class BertLayer(nn.Module):
    def __init__(self, dim: int, heads: int, hidden: int):
        super().__init__()
        self.attn = Attention(dim, heads, heads, bias=True, causal=False)
        self.ln1, self.ln2 = nn.LayerNorm(dim, eps=1e-12), nn.LayerNorm(dim, eps=1e-12)
        self.fc, self.out = nn.Linear(dim, hidden), nn.Linear(hidden, dim)

    def forward(self, x):
        h = self.ln1(x + self.attn(x)[0])
        return self.ln2(h + self.out(F.gelu(self.fc(h))))


def seeded_input(*shape):
    """An fp16 input whose values depend only on its shape."""
    torch.manual_seed(sum(shape))
    return torch.randn(*shape).half()


def seeded(cls, *args):
    """``cls(*args)`` with the same weights every time, in fp16 for inference."""
    torch.manual_seed(1)
    return cls(*args).half().eval()
