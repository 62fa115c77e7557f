"""Print a Granite-3.3-8B step on 1, 2, 4 and 8 cards (tensor parallel) and plot it: docs/host-tp.png.

Run: ``python benchmarks/tensor_parallel.py [--layers 40] [--phase decode prefill] [--cards 1 2 4 8]
[--plot docs/host-tp.png]``. A script, not a test: it prints figures (docs/host.md records them).

The model is benchmarks/model_speed.py's Granite stack, timing-only on meta tensors (decode: one
token, a KV cache of 2048; prefill: 512 tokens), priced by ``spyre_emu.frontend.drawer_step``: one card's
kernel programs simulated once, the copies, launches and all-reduces of one rank per card through the
host model (spyre_emu.host, configs/host.toml), every program built by an earlier step; the KV cache
stays on the cards (``on_card``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib
import torch

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from model_speed import GRANITE, PHASES, granite, model_inputs  # noqa: E402
from spyre_emu.frontend import drawer_step  # noqa: E402


def measure(phase: str, layers: int, cards: int) -> dict:
    tokens, cache = PHASES[phase]
    with torch.device("meta"):
        model = granite(layers, GRANITE).half().eval()
    torch._dynamo.reset()  # a fresh compile per card count
    # a serving loop keeps the KV cache on the cards: only the hidden state, RoPE tables and results cross
    return drawer_step(model, model_inputs(layers, GRANITE, tokens, cache, "meta"), cards, on_card=["cache"])


def plot(rows: dict[str, list[tuple[int, dict]]], path: Path) -> None:
    fig, axes = plt.subplots(1, len(rows), figsize=(5 * len(rows), 3.6), squeeze=False)
    for ax, (phase, figs) in zip(axes[0], rows.items(), strict=True):
        cards = [str(n) for n, _ in figs]
        kernels = [f["card_us"] / 1000 for _, f in figs]
        coll = [f["collective_us"] / 1000 for _, f in figs]
        other = [f["step_us"] / 1000 - k - c for (_, f), k, c in zip(figs, kernels, coll, strict=True)]
        ax.bar(cards, kernels, label="one card's kernels")
        ax.bar(cards, coll, bottom=kernels, label="all-reduces (host memory)")
        ax.bar(cards, other, bottom=[k + c for k, c in zip(kernels, coll, strict=True)],
               label="dispatch and host waits")
        ax.set(xlabel="cards (tensor parallel)", ylabel="ms per step", title=f"Granite-3.3-8B {phase}")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--phase", nargs="+", default=["decode"], choices=list(PHASES))
    ap.add_argument("--cards", nargs="+", type=int, default=[1, 2, 4, 8])
    ap.add_argument("--plot", type=Path, help="write the bar chart here (.png)")
    args = ap.parse_args()
    rows: dict[str, list[tuple[int, dict]]] = {}
    for phase in args.phase:
        base = None
        for cards in args.cards:
            f = measure(phase, args.layers, cards)
            base = base or f["step_us"]
            rows.setdefault(phase, []).append((cards, f))
            print(f"{phase} x{args.layers} layers, TP {cards}: {f['step_us']:12,.1f} µs a step "
                  f"(x{base / f['step_us']:.2f}); "
                  f"one card's kernels {f['card_us']:12,.1f} µs in {f['launches']} launches; {f['collectives']} "
                  f"all-reduces {f['collective_us']:10,.1f} µs ({f['collective_us'] / f['step_us']:.1%}); host busy "
                  f"{f['host_busy_us'][0]:,.1f} µs a rank", flush=True)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
