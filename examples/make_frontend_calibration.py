"""Write the launches behind the calibration cases that need the torch front end
(examples/programs/calibration/*.launches.json); `spyre-emu validate` reads them.

Three measurements of ../shared/calibration/measurements.json are whole calls, not one hand-made
kernel: torch-spyre's examples/mean.py (one launch, timed per phase on the host), a fused SDPA
(wall time per call) and one Granite-3.3-8B block (device time); a fourth, a tuned SwiGLU prefill's
PT utilization, is a range issue 12 quotes (spyre_emu/validation/calibration.py). Each is compiled here through the
front end (`torch.compile(backend="spyre_emu")`, timing-only on meta tensors) and the kernel
programs it launches are written in launch order. spyre_emu/ never imports torch, so validate does
not compile: it simulates these programs and runs the host model over them.

Why a torch-side generator rather than programs built by hand without torch (as make_calibration.py
builds its single kernels): what these rows check is the front end's lowering of a whole call (its
fusions, layouts, relayouts and work divisions); spelling that out again by hand would copy the front
end and drift from it. The price is that the lists are frozen: run this script again when the front
end's lowering changes (tests/frontend/test_frontend_calibration.py checks the mean's list; the SDPA's,
the block's and the SwiGLU's take a minute or more each to compile and are not checked there).

Each call is compiled in the configuration of the graph that was measured. The block's is torch-spyre's
compiled graph with the parameters passed in torch's [out, in] layout, which transposes its four weights
on the card every call (five ReStickifyOpHBM rows, four of them weights, DRAM to DRAM:
AdnanHoque/torch-spyre docs/results/granite_e2e/comms_collectives_20260629.md and its spill inventory of
2026-06-30); so it is compiled with ``weights="stored"`` (docs/frontend.md), not with the default, which
prepares each weight on the host in its consumer's layout.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from model_speed import GRANITE, granite, model_inputs, models  # noqa: E402
from spyre_emu.frontend import last_report  # noqa: E402

OUT = Path(__file__).parent / "programs" / "calibration"
FORMAT = "spyre-emu.launches"


def mean(a: torch.Tensor) -> torch.Tensor:
    return torch.mean(a, dim=0)


def sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v)


def mean_call() -> tuple[object, tuple]:
    """torch-spyre's examples/mean.py: the mean over dim 0 of a (128, 64) tensor (fp16 on the card)."""
    return mean, (torch.empty(128, 64, dtype=torch.float16, device="meta"),)


def sdpa_call() -> tuple[object, tuple]:
    """Non-causal scaled_dot_product_attention without a mask, B=1, H=12, L=512, D=64 (torch-spyre PR 4424)."""
    return sdpa, tuple(torch.empty(1, 12, 512, 64, dtype=torch.float16, device="meta") for _ in range(3))


def block_call() -> tuple[torch.nn.Module, tuple]:
    """One Granite-3.3-8B layer of benchmarks/model_speed.py, a prefill of 512 tokens, batch 1, no cache."""
    with torch.device("meta"):
        layer = granite(1, GRANITE).half().eval().layers[0]
    x, cos, sin = model_inputs(1, GRANITE, 512, 0, "meta")
    return layer, (x, cos, sin)


def swiglu_call() -> tuple[torch.nn.Module, tuple]:
    """Granite-3.3-8B's MLP (model_speed.py's SwiGLU: gate, up, silu, mul, down), a prefill of 512 tokens, batch 1."""
    with torch.device("meta"):
        mlp = models.SwiGLU(GRANITE["dim"], GRANITE["hidden"]).half().eval()
    return mlp, (torch.empty(1, 512, GRANITE["dim"], dtype=torch.float16, device="meta"),)


CALLS = {  # name: (the call, its note, the options of the measured graph's configuration)
    "launch_phases_mean": (mean_call, "torch-spyre examples/mean.py: torch.mean over dim 0 of (128, 64)", {}),
    "sdpa_encoder_b1": (sdpa_call, "fused non-causal SDPA, B=1, H=12, L=512, D=64, no mask", {}),
    "block_granite_prefill": (block_call, "one Granite-3.3-8B block (model_speed.py's layer), prefill of 512 "
                                          "tokens, batch 1, weights in their stored layout, relayouted on the "
                                          "card every call as in the measured graph", {"weights": "stored"}),
    "swiglu_granite_prefill": (swiglu_call, "Granite-3.3-8B's SwiGLU MLP (hidden 4096, intermediate 12800), prefill "
                                            "of 512 tokens, batch 1", {}),
}


def launches(name: str) -> dict:
    """The kernel programs one compiled call of ``name`` launches, in order."""
    make, note, options = CALLS[name]
    fn, args = make()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend="spyre_emu", dynamic=False, options={"functional": False, **options})
    with torch.no_grad():
        compiled(*args)
    report = last_report()
    if report.fallbacks or report.crossings:
        raise SystemExit(f"{name}: the call has CPU fallbacks or PCIe round trips; a launch list holds kernels only")
    return {"format": FORMAT, "version": 1, "note": f"{note}; written by examples/make_frontend_calibration.py",
            "launches": report.kernel_programs}


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name in sys.argv[1:] or CALLS:
        (OUT / f"{name}.launches.json").write_text(json.dumps(launches(name), indent=1) + "\n")


if __name__ == "__main__":
    main()
