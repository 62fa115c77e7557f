"""Print what the host runtime adds to a Granite-3.3-8B step, with graphs built on the launch path or cached.

Run: ``python benchmarks/host_launch.py [--layers 40] [--phase decode|prefill]``. A script, not a
test: it prints figures (docs/host.md records them).

The model is benchmarks/model_speed.py's Granite stack, compiled timing-only on meta tensors; each
kernel program the front end launches becomes a ``Launch`` with its simulated card time (identical
layers' launches are the same program), each PCIe round trip a pair of copies. The host model
(spyre_emu.host, configs/host.toml) then runs the step three ways, as IBM compared them: graphs
built on both paths, off the data-transfer path, and off compute dispatch as well.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from model_speed import GRANITE, PHASES, granite, model_inputs  # noqa: E402
from spyre_emu.frontend import last_report  # noqa: E402

from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.host import Copy, Launch, load_host, simulate_host  # noqa: E402

IBM = {"decode": (1.136, 2.4), "prefill": (1.099, 1.7)}  # speed-ups: transfer path off; both paths off


def step_ops(phase: str, layers: int) -> list:
    """The launches (and copies) of one compiled step, in order."""
    tokens, cache = PHASES[phase]
    with torch.device("meta"):
        model = granite(layers, GRANITE).half().eval()
    compiled = torch.compile(model, backend="spyre_emu", dynamic=False, options={"functional": False})
    with torch.no_grad():
        compiled(*model_inputs(layers, GRANITE, tokens, cache, "meta"))
    rep = last_report()
    ops = [Launch(hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12], prog["latency_us"])
           for data, prog in zip(rep.kernel_programs, rep.programs, strict=True)]
    ops += [Copy("d2h" if c["direction"].startswith("d") else "h2d", c["bytes"]) for c in rep.crossings]
    return ops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--phase", choices=list(PHASES), default="decode")
    args = ap.parse_args()
    ops = step_ops(args.phase, args.layers)
    host, machine = load_host(), load_machine()
    launches = [op for op in ops if isinstance(op, Launch)]
    print(f"{args.phase}, {args.layers} layers: {len(launches)} launches of {len({op.program for op in launches})} "
          f"programs, {len(ops) - len(launches)} copies, {sum(op.card_us for op in launches):,.1f} µs on the card")
    modes = {"built on both paths": (False, False), "off the transfer path": (False, True),
             "off both (cached)": (True, True)}
    times = {name: simulate_host(ops, host, machine, cached_launches=a, cached_copies=b).end_us
             for name, (a, b) in modes.items()}
    base = times["built on both paths"]
    for name, us in times.items():
        print(f"  graphs {name:<24} {us:14,.1f} µs per step  speed-up x{base / us:.2f}")
    transfer, both = IBM[args.phase]
    print(f"IBM, Granite-3.3-8B batch 1 seq 1024: x{transfer:.3f} off the transfer path, x{both:.1f} off both")


if __name__ == "__main__":
    main()
