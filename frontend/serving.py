"""Step prices for ``spyre_emu.serving``: each distinct step shape of a decoder compiled by the
``spyre_emu`` backend on meta tensors (timing only) and simulated once.

A step is the decoder stack over ``batch`` × ``tokens`` new tokens, attending over a KV cache of
``tkv`` keys that already holds this step's slots, plus the LM head over one row per sequence
(the token sampled next). The kernel programs go through the result cache (spyre_emu.memo), so a
shape simulated in an earlier process costs only its compile; identical layers give identical
programs, simulated once per shape.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
from pathlib import Path
from typing import Any, Protocol

import torch
from torch import nn

from spyre_emu import memo
from spyre_emu.config import load_machine
from spyre_emu.errors import ConfigError
from spyre_emu.serving.models import DTYPE_BYTES, ModelSpec, preset
from spyre_emu.serving.steps import StepShape

from .drawer import drawer_step
from .report import last_report

F = nn.functional
MAX_SPAN_BYTES = 1 << 28  # 256 MB


class ServedModel(Protocol):
    """What ``--model module:attr`` names (or a ModelSpec, built as the presets are)."""

    name: str

    def weight_bytes(self) -> int: ...
    def kv_bytes_per_token(self) -> int: ...
    def build(self, shape: StepShape) -> list[tuple[nn.Module, tuple[Any, ...], float]]:
        """What a step of ``shape`` costs: (module, its meta inputs, factor); the step's price is the sum
        of factor × the module's simulated latency."""
        ...


class _RMSNorm(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * self.weight


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class _Layer(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        self.spec, kv = spec, spec.kv_heads * spec.head_dim
        self.norm1, self.norm2 = _RMSNorm(spec.dim), _RMSNorm(spec.dim)
        self.q, self.o = nn.Linear(spec.dim, spec.dim, bias=False), nn.Linear(spec.dim, spec.dim, bias=False)
        self.k, self.v = nn.Linear(spec.dim, kv, bias=False), nn.Linear(spec.dim, kv, bias=False)
        self.gate, self.up = nn.Linear(spec.dim, spec.hidden, bias=False), nn.Linear(spec.dim, spec.hidden, bias=False)
        self.down = nn.Linear(spec.hidden, spec.dim, bias=False)

    def forward(self, x, cos, sin, keys=None, values=None):
        """A static cache (``keys``, ``values``) already holds this step's slots; without one the step
        is a first prefill chunk, causal over itself."""
        s, b, n = self.spec, x.shape[0], x.shape[1]
        h = self.norm1(x)
        q = _rotate(self.q(h).view(b, n, s.heads, s.head_dim).transpose(1, 2), cos, sin)
        k = _rotate(self.k(h).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2), cos, sin)
        v = self.v(h).view(b, n, s.kv_heads, s.head_dim).transpose(1, 2)
        first = keys is None
        att = F.scaled_dot_product_attention(q, k if first else keys, v if first else values, is_causal=first,
                                             enable_gqa=s.kv_heads != s.heads)
        x = x + self._scaled(self.o(att.transpose(1, 2).reshape(b, n, -1)))
        h = self.norm2(x)
        return x + self._scaled(self.down(F.silu(self.gate(h)) * self.up(h))), k, v

    def _scaled(self, branch):
        m = self.spec.residual_multiplier
        return branch if m == 1.0 else branch * m


class _Stack(nn.Module):
    def __init__(self, spec: ModelSpec, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(_Layer(spec) for _ in range(layers))

    def forward(self, x, cos, sin, *cache):
        kv = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, *cache[2 * i:2 * i + 2])
            kv += [k, v]
        return x, *kv


class _Head(nn.Module):
    """The final norm and the LM head, its weight cut along the vocabulary into pieces of at most
    MAX_SPAN_BYTES: a core may span at most 256 MB of one tensor (DESIGN.md), and the whole
    head (403 MB for Granite, 1 GB for Llama) would otherwise run on the CPU, unpriced."""

    def __init__(self, spec: ModelSpec):
        super().__init__()
        pieces = -(-spec.vocab * spec.dim * DTYPE_BYTES // MAX_SPAN_BYTES)
        sizes = [spec.vocab // pieces + (i < spec.vocab % pieces) for i in range(pieces)]
        self.norm = _RMSNorm(spec.dim)
        self.out = nn.ModuleList(nn.Linear(spec.dim, n, bias=False) for n in sizes)

    def forward(self, x):
        h = self.norm(x)
        return tuple(piece(h) for piece in self.out)


class Decoder:
    """A ModelSpec as modules on the meta device: the layer stack and the head (embedding lookups run
    on the host and are not priced).

    With ``extrapolate`` the stack is priced from stacks of one and two layers: a layer's launches
    run one after another on a quiet card and identical layers give identical programs, so L layers
    cost P1 + (L - 1)(P2 - P1) exactly (tests/frontend/test_serving.py checks it against a direct
    stack), while Dynamo and the front end's passes see 2 layers instead of L.
    """

    def __init__(self, spec: ModelSpec, extrapolate: bool = True):
        self.spec, self.name = spec, spec.name
        counts = (1, 2) if extrapolate and spec.layers > 2 else (spec.layers,)
        with torch.device("meta"):
            self.stacks = [(_Stack(spec, n).half().eval(), n) for n in counts]
            self.head = _Head(spec).half().eval()

    def _factors(self) -> list[float]:
        layers = self.spec.layers
        return [1.0] if len(self.stacks) == 1 else [2.0 - layers, layers - 1.0]

    def weight_bytes(self) -> int:
        return self.spec.weight_bytes()

    def kv_bytes_per_token(self) -> int:
        return self.spec.kv_bytes_per_token()

    def build(self, shape: StepShape) -> list[tuple[nn.Module, tuple[Any, ...], float]]:
        s, meta = self.spec, {"device": "meta", "dtype": torch.float16}
        x = torch.empty(shape.batch, shape.tokens, s.dim, **meta)
        rope = (torch.empty(shape.tokens, s.head_dim, **meta), torch.empty(shape.tokens, s.head_dim, **meta))
        first_chunk = shape.tokens > 1 and shape.tkv == shape.tokens
        cache = [] if first_chunk else [torch.empty(shape.batch, s.kv_heads, shape.tkv, s.head_dim, **meta)
                                        for _ in range(2 * max(n for _, n in self.stacks))]
        steps = [(stack, (x, *rope, *cache[:2 * n]), f)
                 for (stack, n), f in zip(self.stacks, self._factors(), strict=True)]
        return [*steps, (self.head, (torch.empty(shape.batch, 1, s.dim, **meta),), 1.0)]


def load_model(name: str) -> ServedModel:
    """A preset name, or ``module:attr`` naming a ModelSpec or a ServedModel."""
    if ":" not in name:
        return Decoder(preset(name))
    module, _, attr = name.partition(":")
    try:
        found = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load {name!r}: {exc}", None, "--model") from None
    if isinstance(found, ModelSpec):
        return Decoder(found)
    if not all(callable(getattr(found, m, None)) for m in ("weight_bytes", "kv_bytes_per_token", "build")):
        raise ConfigError(f"{name!r} is neither a ModelSpec nor a model with weight_bytes, kv_bytes_per_token "
                          "and build", None, "--model")
    return found


@functools.cache
def _front_end_version() -> bytes:
    """A hash of the front end's sources (memo.key covers the simulator's)."""
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(Path(__file__).parent.glob("*.py")))).digest()


class StepPricer:
    """``pricer(shape)`` → the step's simulated latency in µs on ``machine`` (a TOML path, None: the
    default card) with ``overrides`` (KEY=VALUE). Memoize it with spyre_emu.serving.steps.memoized.

    A preset's or ModelSpec's step prices are also kept in the result cache (spyre_emu.memo), keyed
    by the spec, the machine, the shape and the code of the simulator and the front end, so a later
    run skips even the compile; another model's are priced afresh in every process."""

    def __init__(self, model: ServedModel, machine: str | None = None, overrides: tuple[str, ...] = ()):
        self.model = model
        self.card = repr(load_machine(machine, overrides)).encode()
        # fallback "error": an op the card cannot run would be left out of the price, so it is refused
        self.options: dict[str, Any] = {"set": overrides, "fallback": "error",
                                        **({"machine": machine} if machine else {})}

    def __call__(self, shape: StepShape) -> float:
        if not isinstance(self.model, Decoder):
            return self._simulate(shape)
        k = memo.key(b"serving step", _front_end_version(), repr(self.model.spec).encode(),
                     repr(len(self.model.stacks)).encode(), self.card, repr(tuple(shape)).encode())
        price = memo.lookup(k)
        if price is None:
            price = self._simulate(shape)
            memo.store(k, price)
        return price

    def _simulate(self, shape: StepShape) -> float:
        """On one card, the kernel programs' latency; on ``tp`` cards (tensor parallel, drawer.py), one
        card's kernels plus the collectives on the drawer. Host launch work is left out at any ``tp``."""
        total = 0.0
        with torch.no_grad():
            for module, inputs, factor in self.model.build(shape):
                torch._dynamo.reset()  # each shape compiles once; no recompile limit to reach
                if shape.tp == 1:
                    torch.compile(module, backend="spyre_emu", dynamic=False, options=self.options)(*inputs)
                    total += factor * last_report().latency_us
                else:
                    step = drawer_step(module, inputs, shape.tp, **self.options)
                    total += factor * (step["card_us"] + step["collective_us"])
        return total
