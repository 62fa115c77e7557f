"""Print how the model zoo fares through ``torch.compile(backend="spyre_emu")``: a row per model.

Run: ``python benchmarks/model_zoo.py [NAME ...] [--markdown]``. A script, not a test: it prints
figures and never asserts them (docs/models.md records a run). Each model (tests/frontend/zoo.py:
small configs, random weights, fp16) is compiled with ``dynamic=False`` and called once on CPU
tensors; the row gives whether it compiled and ran, the largest error against the same model in
float32 eager (relative to the reference's largest magnitude), the share of positions whose argmax
agrees, kernels, CPU fallbacks, PCIe round trips, the share of FLOPs on the card, the simulated
latency and the wall time of the call.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
import warnings
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from spyre_emu.frontend import last_report  # noqa: E402

from tests.frontend import zoo  # noqa: E402

COLUMNS = ("model", "runs", "max error", "argmax", "kernels", "fallbacks", "round trips", "FLOPs on card",
           "simulated µs", "wall s")


def measure(name: str) -> dict[str, object]:
    model, inputs = zoo.build(name)
    reference = copy.deepcopy(model).float()
    row: dict[str, object] = {"model": name}
    with torch.no_grad():
        want = zoo.first_output(reference(**{k: v.float() if v.is_floating_point() else v
                                            for k, v in inputs.items()})).float()
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="spyre_emu", dynamic=False)
        start = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = zoo.first_output(compiled(**inputs)).float()
        except Exception as exc:  # the row says why, the script goes on
            return {**row, "runs": f"no: {type(exc).__name__}: {' '.join(str(exc).split())[:120]}"}
        wall = time.perf_counter() - start
    rep = last_report()
    scale = max(want.abs().max().item(), 1e-6)
    agree = (got.argmax(-1) == want.argmax(-1)).float().mean().item() if got.dim() > 1 else float("nan")
    return {**row, "runs": "yes", "max error": f"{(got - want).abs().max().item() / scale:.2e}",
            "argmax": f"{agree:.0%}", "kernels": len(rep.kernels), "fallbacks": rep.fallback_count,
            "round trips": len(rep.crossings), "FLOPs on card": f"{rep.card_flop_share:.1%}",
            "simulated µs": f"{rep.latency_us:,.1f}", "wall s": f"{wall:.1f}"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models (default: all of {', '.join(zoo.MODELS)})")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = ap.parse_args()
    rows = [measure(name) for name in args.names or zoo.MODELS]
    if args.markdown:
        print("| " + " | ".join(COLUMNS) + " |\n|" + "---|" * len(COLUMNS))
        for row in rows:
            print("| " + " | ".join(str(row.get(c, "")) for c in COLUMNS) + " |")
        return
    for row in rows:
        print("  ".join(f"{c}={row[c]}" for c in COLUMNS if c in row))


if __name__ == "__main__":
    main()
