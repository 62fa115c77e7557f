"""Print how the model zoo fares through ``torch.compile(backend="spyre_emu")``: a row per model.

Run: ``python benchmarks/model_zoo.py [NAME ...] [--markdown] [--generate]``. A script, not a test: it prints
figures and never asserts them (docs/models.md records a run). Each model (tests/frontend/zoo.py:
small configs, random weights, fp16) is compiled with ``dynamic=False`` and called once on CPU
tensors; the row gives whether it compiled and ran, the largest error against the same model in
float32 eager (relative to the reference's largest magnitude), the share of positions whose argmax
agrees, kernels, CPU fallbacks, PCIe round trips, the share of FLOPs on the card, the simulated
latency and the wall time of the call. With ``--generate``, each decoder also generates 8 tokens
greedily from its first 8 through ``compiled.generate`` and the row says how many are eager's.
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
           "simulated µs", "wall s", "generate")
NEW_TOKENS = 8


def measure(name: str, generate: bool = False) -> dict[str, object]:
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
    if generate and zoo.MODELS[name][2]:
        row["generate"] = _generate(model, compiled, inputs["input_ids"][:, :8])
    return {**row, "runs": "yes", "max error": f"{(got - want).abs().max().item() / scale:.2e}",
            "argmax": f"{agree:.0%}", "kernels": len(rep.kernels), "fallbacks": rep.fallback_count,
            "round trips": len(rep.crossings), "FLOPs on card": f"{rep.card_flop_share:.1%}",
            "simulated µs": f"{rep.latency_us:,.1f}", "wall s": f"{wall:.1f}"}


def _generate(model: torch.nn.Module, compiled: torch.nn.Module, ids: torch.Tensor) -> str:
    """New tokens of the compiled model's greedy generation equal to eager's, out of NEW_TOKENS."""
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)[:, ids.shape[1]:]
        try:
            got = compiled.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)[:, ids.shape[1]:]
        except Exception as exc:  # the row says why
            return f"no: {type(exc).__name__}"
    same = int((got == want).cumprod(-1).sum())  # up to the first difference: later tokens follow other text
    return f"{same}/{want.numel()}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help=f"models (default: all of {', '.join(zoo.MODELS)})")
    ap.add_argument("--markdown", action="store_true", help="print a markdown table")
    ap.add_argument("--generate", action="store_true", help=f"decoders also generate {NEW_TOKENS} tokens")
    args = ap.parse_args()
    rows = [measure(name, args.generate) for name in args.names or zoo.MODELS]
    columns = COLUMNS if args.generate else COLUMNS[:-1]
    if args.markdown:
        print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
        for row in rows:
            print("| " + " | ".join(str(row.get(c, "")) for c in columns) + " |")
        return
    for row in rows:
        print("  ".join(f"{c}={row[c]}" for c in columns if c in row))


if __name__ == "__main__":
    main()
