"""Print how long torch takes to turn the Granite-3.3-8B stack into the ATen graph the front end reads.

Run: ``python benchmarks/trace_speed.py [--layers 40] [--phase decode] [--repeat 3]``. A script, not a
test: it prints figures and never asserts a time (docs/speed.md records the measurements).

In one process: Dynamo captures the model's graph once (timed), then the ATen graph is made from it
``--repeat`` times each way, alternately, so both see the same machine load: aot_autograd with the
backend's decompositions (the reference: the backend's path before frontend/trace.py, and still its
path for graphs that write in place) and the single trace (frontend/trace.py). It prints each run,
the fastest of each, their ratio, and whether the two graphs' code is identical.
"""

from __future__ import annotations

import argparse
import time

import torch
from model_speed import GRANITE, PHASES, granite, model_inputs
from spyre_emu.frontend.decompositions import decompositions, rewrite_attention
from spyre_emu.frontend.trace import trace_inference
from torch._dynamo.backends.common import aot_autograd


def capture(layers: int, phase: str) -> tuple[float, torch.fx.GraphModule, list]:
    """Dynamo's graph of the model (meta tensors, batch 1) and the wall time Dynamo took for it."""
    caught = []

    def backend(gm, example_inputs):
        rewrite_attention(gm)
        caught.append((gm, example_inputs))
        return gm.forward
    tokens, cache = PHASES[phase]
    with torch.device("meta"):
        model = granite(layers, GRANITE).half().eval()
    inputs = model_inputs(layers, GRANITE, tokens, cache, "meta")
    torch._dynamo.reset()
    with torch.no_grad():
        start = time.perf_counter()
        torch.compile(model, backend=backend, dynamic=False)(*inputs)
        spent = time.perf_counter() - start
    (gm, example_inputs), = caught
    return spent, gm, example_inputs


def through_aot(gm: torch.fx.GraphModule, example_inputs: list) -> torch.fx.GraphModule:
    got = []

    def keep(aten_gm, _):
        got.append(aten_gm)
        return aten_gm
    aot_autograd(fw_compiler=keep, decompositions=decompositions())(gm, example_inputs)
    return got[0]


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return time.perf_counter() - start, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--phase", choices=list(PHASES), default="decode")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    dynamo, gm, example_inputs = capture(args.layers, args.phase)
    print(f"{args.phase} x{args.layers} layers: Dynamo's capture {dynamo:.2f} s, "
          f"{sum(n.op == 'call_function' for n in gm.graph.nodes)} calls in its graph")
    aot_s, single_s = [], []
    with torch.no_grad():
        for i in range(args.repeat):
            t_aot, aot_gm = timed(through_aot, gm, example_inputs)
            t_single, single_gm = timed(trace_inference, gm, example_inputs, decompositions())
            aot_s.append(t_aot)
            single_s.append(t_single)
            same = single_gm is not None and single_gm.code == aot_gm.code
            print(f"  run {i + 1}: aot_autograd {t_aot:.2f} s, single trace {t_single:.2f} s, "
                  f"x{t_aot / t_single:.2f}, graphs {'identical' if same else 'DIFFER'}")
    print(f"fastest: aot_autograd {min(aot_s):.2f} s, single trace {min(single_s):.2f} s, "
          f"speed-up x{min(aot_s) / min(single_s):.2f}")


if __name__ == "__main__":
    main()
