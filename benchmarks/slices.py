"""Print what a fused QKV projection's split costs with its slices on the card and through the host.

Run: ``python benchmarks/slices.py``. A script, not a test: it prints figures (docs/models.md records
a run). The block is a fused QKV projection, its split into Q, K and V along the last dim, and their
heads (view and transpose, as attention takes them), then a pointwise op on each: phi3's and GPT-2's
pattern. Each shape is compiled timing-only on meta tensors twice: with the slices as restickify
kernels (the front end's default, view_ops.window), and with ``view_ops.window`` refusing them, so
they run on the host as before (a copy of the projection out, one copy of each part in). The row
gives kernels, PCIe round trips and simulated µs of both, and the ratio host / card.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spyre_emu.frontend import last_report, view_ops  # noqa: E402

# (tokens, hidden, heads): the zoo's tiny config, then phi3-mini's and a Llama-8B-sized projection at 512 tokens
SHAPES = [(16, 128, 4), (512, 3072, 32), (512, 4096, 32)]


class FusedQKV(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.qkv, self.hidden, self.heads = nn.Linear(hidden, 3 * hidden, bias=False), hidden, heads

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        b, s, _ = x.shape
        parts = self.qkv(x).split(self.hidden, dim=-1)
        return tuple(p.view(b, s, self.heads, -1).transpose(1, 2) * 2 for p in parts)


def _host_slices(*args: object, **kwargs: object) -> None:
    raise view_ops.UnsupportedError("slices on the host (the reference)")


def measure(tokens: int, hidden: int, heads: int, on_card: bool) -> tuple[int, int, float]:
    model = FusedQKV(hidden, heads).half().eval().to("meta")
    x = torch.empty(1, tokens, hidden, dtype=torch.float16, device="meta")
    torch._dynamo.reset()
    window = view_ops.window
    if not on_card:
        view_ops.window = _host_slices
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.compile(model, backend="spyre_emu", dynamic=False)(x)
    finally:
        view_ops.window = window
    rep = last_report()
    return len(rep.kernels), len(rep.crossings), rep.latency_us


def main() -> None:
    print("| tokens × hidden, heads | card: kernels, round trips, µs | host: kernels, round trips, µs | host / card |")
    print("|---|---|---|---|")
    for tokens, hidden, heads in SHAPES:
        card = measure(tokens, hidden, heads, True)
        host = measure(tokens, hidden, heads, False)
        print(f"| {tokens} × {hidden}, {heads} | {card[0]}, {card[1]}, {card[2]:,.1f} | {host[0]}, {host[1]}, "
              f"{host[2]:,.1f} | {host[2] / card[2]:.2f} |")


if __name__ == "__main__":
    main()
