"""Print how long a whole Granite-3.3-8B forward pass takes to simulate, and where the time goes.

Run: ``python benchmarks/model_speed.py [--layers 40] [--phase decode prefill small] [--wrap]
[--reference REV | --baseline FILE] [--save FILE]``. A script, not a test: it prints figures and
never asserts a time (docs/speed.md records the measurements).

Each figure is the first ``torch.compile`` call of a fresh process (a child of this one) with
the numba cache on disk: timing-only on meta tensors, batch 1; decode reads a KV cache of 2048,
prefill runs 512 tokens. The child prints its wall time, peak resident memory, simulated cycles
and the wall time of each stage (torch's decomposition table, the ATen trace, the front end's passes,
lowering, the unit program's parse, pack (numba's import with the first), the event loop (numba's
cache load with the first), the event log, the report, the garbage collector's full and young
collections); the call less the backend's stages and the run is Dynamo's. ``small`` is a 2-layer toy
decoder: the best of five warm calls, and the share of it spent simulating.

The reference is either a git revision, checked out in a temporary worktree and run by the same
children (so the same model, the other simulator), or a baseline file of earlier figures written
by ``--save``. Set ``SPYRE_EMU_RESULT_CACHE=0`` to measure without the result cache. ``--wrap``
marks the decoder layer as a nested compile region (``torch.compiler.nested_compile_region``, so
torch captures it once; frontend/subgraphs.py); its reference is then this tree with the layer
unwrapped, unless ``--reference`` names a revision (run unwrapped; wrapped too with
``--wrap-reference``, which compares two trees on the same wrapped model).
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.frontend.models, whatever the current directory
from checkout import child_json  # noqa: E402
from stages import timed_stages  # noqa: E402

from tests.frontend import models  # noqa: E402

GRANITE = {"dim": 4096, "heads": 32, "kv_heads": 8, "hidden": 12800}   # Granite-3.3-8B-Instruct
TOY = {"dim": 128, "heads": 4, "kv_heads": 2, "hidden": 256}
RESIDUAL_MULTIPLIER, ATTENTION_MULTIPLIER = 0.22, 0.0078125
PHASES = {"decode": (1, 2048), "prefill": (512, 0)}  # tokens, KV cache length
STAGES = [  # (module, function): wall time spent inside, inclusive, where the module has it
    ("spyre_emu.frontend.backend", "decompositions"), ("spyre_emu.frontend.backend", "trace_inference"),
    ("spyre_emu.frontend.backend", "compile_graph"), ("spyre_emu.frontend.compile_store", "load"),
    ("spyre_emu.frontend.compile", "lower"),
    ("spyre_emu.pipeline", "lower"),  # the front end lowers through pipeline.lowered (a miss only)
    ("spyre_emu.lowering", "parse_unit_program"), ("spyre_emu.frontend.runtime", "run"),
    ("spyre_emu.engine", "pack"), ("spyre_emu.engine", "_run"), ("spyre_emu.engine", "make_log"),
    ("spyre_emu.pipeline", "build_report"),
]


def granite(layers: int, dims: dict[str, int], wrap: bool = False):
    """A Granite decoder stack (RMSNorm, GQA with RoPE, SwiGLU, scaled residuals) and the final norm;
    with ``wrap``, the layer a nested compile region."""
    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = models.RMSNorm(dims["dim"]), models.RMSNorm(dims["dim"])
            self.attn = models.Attention(dims["dim"], dims["heads"], dims["kv_heads"])
            self.mlp = models.SwiGLU(dims["dim"], dims["hidden"])

        def forward(self, x, cos, sin, *cache):  # tensors, not tuples: a region's fast reuse check (speed.md)
            attn, k, v = self.attn(self.norm1(x), (cos, sin), cache or None)
            h = x + attn * RESIDUAL_MULTIPLIER
            return h + self.mlp(self.norm2(h)) * RESIDUAL_MULTIPLIER, k, v

    if wrap:
        Layer.forward = torch.compiler.nested_compile_region(Layer.forward)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList(Layer() for _ in range(layers))
            self.norm = models.RMSNorm(dims["dim"])

        def forward(self, x, cos, sin, *cache):
            kv = []
            for i, layer in enumerate(self.layers):
                x, k, v = layer(x, cos, sin, *cache[2 * i:2 * i + 2])
                kv += [k, v]
            return self.norm(x), *kv

    return Model()


def model_inputs(layers: int, dims: dict[str, int], tokens: int, cache: int, device: str):
    head_dim = dims["dim"] // dims["heads"]
    x = torch.randn(1, tokens, dims["dim"], device=device).half()
    cos, sin = models.rope(tokens, head_dim, device=device)
    kv = [torch.randn(1, dims["kv_heads"], cache, head_dim, device=device).half() for _ in range(2 * layers)]
    return (x, cos, sin, *(kv if cache else []))


def time_collections(spent: dict[str, float]) -> None:
    """Add each garbage collection's wall time to ``spent``: "gc.full" (generation 2, a walk of torch's whole
    heap, which falls inside Dynamo's part of a first call) and "gc.young"."""
    began = [0.0]

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            began[0] = time.perf_counter()
            return
        key = "gc.full" if info["generation"] == 2 else "gc.young"
        spent[key] = spent.get(key, 0.0) + time.perf_counter() - began[0]
    gc.callbacks.append(note)


def child(phase: str, layers: int, wrap: bool) -> dict:
    """One measurement in this (fresh) process: the first compiled call, or warm calls of the toy."""
    last_report = importlib.import_module("spyre_emu.frontend").last_report  # from the checkout under test
    spent: dict[str, float] = {}
    timed_stages(STAGES, spent)
    small = phase == "small"
    dims = TOY if small else GRANITE
    tokens, cache = (16, 0) if small else PHASES[phase]
    device = "cpu" if small else "meta"
    with torch.device(device):
        model = granite(layers, dims, wrap).half().eval()
    inputs = model_inputs(layers, dims, tokens, cache, device)
    compiled = torch.compile(model, backend="spyre_emu", dynamic=False)
    time_collections(spent)
    with torch.no_grad():
        start, cpu = time.perf_counter(), time.process_time()
        compiled(*inputs)
        first, cpu = time.perf_counter() - start, time.process_time() - cpu
        best = dict(spent)
        for _ in range(5 if small else 0):  # keep the fastest warm call and its stages
            spent.clear()
            start, warm_cpu = time.perf_counter(), time.process_time()
            compiled(*inputs)
            if time.perf_counter() - start < first:
                first, cpu, best = time.perf_counter() - start, time.process_time() - warm_cpu, dict(spent)
    rep = last_report()
    return {"wall_s": first, "cpu_s": cpu, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "cycles": rep.total_cycles, "kernels": len(rep.kernels), "programs": len(rep.programs),
            "stages_s": {k: round(v, 3) for k, v in best.items()}}


def measure(root: Path, phase: str, layers: int, wrap: bool = False) -> dict:
    """Run ``child`` in a fresh interpreter against the simulator checked out at ``root``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return child_json([__file__, "--child", phase, "--layers", str(layers), "--root", str(root),
                       *(["--wrap"] if wrap else [])], f"{phase} at {root}", env=env)


def use_checkout(root: Path) -> None:
    """Import spyre_emu (and its front end, which installs as spyre_emu.frontend) from ``root``."""
    sys.path.insert(0, str(root))
    spyre_emu = importlib.import_module("spyre_emu")
    assert Path(spyre_emu.__file__).parent == root / "spyre_emu", spyre_emu.__file__
    spec = importlib.util.spec_from_file_location("spyre_emu.frontend", root / "frontend" / "__init__.py",
                                                  submodule_search_locations=[str(root / "frontend")])
    module = importlib.util.module_from_spec(spec)
    sys.modules["spyre_emu.frontend"] = module
    spec.loader.exec_module(module)


def warm_numba(root: Path) -> None:
    """Compile the engine of ``root`` into the numba cache before anything is timed."""
    measure(root, "small", 1)


def show(name: str, new: dict, ref: dict | None) -> None:
    ratio = f"  reference {ref['wall_s']:8.2f} s  speed-up x{ref['wall_s'] / new['wall_s']:.2f}" if ref else ""
    if ref and "cpu_s" in ref and "cpu_s" in new:
        ratio += f"  CPU {new['cpu_s']:.2f} s against {ref['cpu_s']:.2f} s: x{ref['cpu_s'] / new['cpu_s']:.2f}"
    same = "" if ref is None else ("  cycles equal" if ref["cycles"] == new["cycles"] else
                                   f"  CYCLES DIFFER: reference {ref['cycles']}")
    print(f"{name:<22} {new['wall_s']:8.2f} s  peak {new['peak_rss_mb']:7.0f} MB  {new['cycles']:>12} cycles  "
          f"{new['kernels']} kernels in {new['programs']} programs{ratio}{same}")
    print(f"{'':<22} stages: " + ", ".join(f"{k} {v:.2f}" for k, v in new["stages_s"].items()))
    if ref and ref.get("stages_s"):
        print(f"{'':<22} reference: " + ", ".join(f"{k} {v:.2f}" for k, v in ref["stages_s"].items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--phase", nargs="+", default=["decode", "prefill", "small"], choices=[*PHASES, "small"])
    ap.add_argument("--reference", help="a git revision to compare against (run from a temporary worktree)")
    ap.add_argument("--baseline", type=Path, help="a file of earlier figures (--save) to compare against")
    ap.add_argument("--repeat", type=int, default=1,
                    help="measure N times, this tree and the reference alternately; each run, then the fastest")
    ap.add_argument("--wrap", action="store_true",
                    help="mark the layer as a nested compile region; the reference runs it unwrapped")
    ap.add_argument("--wrap-reference", action="store_true",
                    help="with --wrap and --reference: the reference revision runs the wrapped model too")
    ap.add_argument("--save", type=Path, help="write this run's figures to FILE")
    ap.add_argument("--child", choices=[*PHASES, "small"], help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        use_checkout(args.root)
        print(json.dumps(child(args.child, args.layers, args.wrap)))
        return
    baseline = json.loads(args.baseline.read_text()) if args.baseline else {}
    warm_numba(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        ref_root = Path(tmp) / "reference"
        if args.reference:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(ref_root), args.reference],
                           check=True)
        try:  # the reference's worktree is removed however its children end
            if args.reference:
                warm_numba(ref_root)
            figures = {}
            for phase in args.phase:
                layers = 2 if phase == "small" else args.layers
                name = f"{phase} x{layers} layers" + (" wrapped" if args.wrap else "")
                other = ref_root if args.reference else ROOT if args.wrap else None
                ref_wrap = args.wrap and args.wrap_reference and bool(args.reference)
                runs = [(measure(ROOT, phase, layers, args.wrap), other and measure(other, phase, layers, ref_wrap))
                        for _ in range(args.repeat)]  # alternated, so both see the same load on average
                figures[name] = min((new for new, _ in runs), key=lambda f: f["wall_s"])
                ref = (min((r for _, r in runs), key=lambda f: f["wall_s"]) if other
                       else baseline.get(name))
                for new, other in runs if len(runs) > 1 else []:
                    show(f"{name} (one run)", new, other)
                show(name, figures[name], ref)
        finally:
            if args.reference:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(ref_root)], check=True)
    if args.save:
        args.save.write_text(json.dumps(figures, indent=1) + "\n")


if __name__ == "__main__":
    main()
