"""Print what would make the model's prefill gain from taking graphs off the launch path as large as IBM's.

Run: ``python benchmarks/host_prefill.py [--layers 40] [--card-scale 1.54 1.88]``. A script, not a test: it prints
figures (docs/host.md records them).

IBM's Granite-3.3-8B figures (batch 1, sequence 1024; host_launch.py) give both-path gains of +140 % at decode
and +70 % at prefill; the model (graph_us derived from decode) gives prefill +31.9 %. The gain on the graph path
is about launches x per-launch cost / card time, so the candidates are the card time, the number of launches and
a per-launch cost that grows with the program. Each is tried on the same steps:

- **card time**: every prefill kernel's time scaled by ``--card-scale`` (silicon's Granite block at 512 tokens
  over the model's block with the front end's default weights, prepared on the host as in this step: 12,033.5 /
  7,814.6 = 1.54 with LX relayout, 14,697.7 / 7,814.6 = 1.88 without; the measured graph transposes its weights
  on the card every call, and the model running that program is within 3.1 % of silicon, docs/validation.md);
- **launches**: each prefill launch's graph cost scaled by silicon's SDSCs per block over the front end's programs
  (45.5 / 35 = 1.30: the cost of 30 % more launches, the card time unchanged);
- **a cost per instruction**: a launch's graph cost a + b x (its program's instructions), what a rebuild that
  deserializes and reloads the program at every launch would cost (torch-spyre's graph path of the time,
  module.cpp: Deserialize, LoadGraph, CompileGraph, ParseGraph and the DeviceInit Predict on every launch).
  No public figure gives a or b, so both are fitted to IBM's two both-path figures: a fit, not a check.

On the graph path every op waits for the one before, so a launch's extra graph cost adds to the step exactly as
extra card time of that launch does: the script adds it to the launch's card time in the "before" runs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from host_launch import IBM, step_ops, step_us  # noqa: E402
from spyre_emu.frontend import last_report  # noqa: E402

from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.host import Copy, Host, Launch, load_host  # noqa: E402

SDSC_PER_BLOCK, PROGRAMS_PER_BLOCK = 45.5, 35  # silicon's block: 44 to 47 SDSCs; the front end's 512-token block


def sized_ops(phase: str, layers: int) -> tuple[list, list[int]]:
    """A step's ops (host_launch.step_ops, the graph's own copies) and each launch's program size in instructions."""
    ops = step_ops(phase, layers, False)
    return ops, [p["instructions"] for p in last_report().programs]


def with_extra(ops: list, extra: list[float]) -> list:
    """``ops`` with each launch's card time grown by its ``extra`` µs (in launch order)."""
    it = iter(extra)
    return [replace(op, card_us=op.card_us + next(it)) if isinstance(op, Launch) else op for op in ops]


def gains(ops: list, host: Host, machine, extra: list[float] | None = None) -> tuple[float, float]:
    """The transfer-path and both-path gains, with ``extra`` µs of graph cost on each launch when graphs are built."""
    before = with_extra(ops, extra) if extra else ops
    both = step_us(before, host, machine, False, False)
    off_transfer = step_us(before, host, machine, False, True)
    cached = step_us(ops, host, machine, True, True)
    return both / off_transfer - 1, both / cached - 1


def line(what: str, phase: str, g: tuple[float, float]) -> str:
    transfer, both = (r - 1 for r in IBM[phase])
    return (f"  {what:<52} transfer {g[0]:+7.1%} (IBM {transfer:+.1%}, {g[0] / transfer - 1:+.0%})  "
            f"both {g[1]:+7.1%} (IBM {both:+.1%}, {g[1] / both - 1:+.0%})")


def fit_per_instruction(steps: dict, host: Host, machine) -> tuple[float, float]:
    """(a, b): graph cost a per launch or copy plus b per instruction of a launch's program, at which both phases
    give IBM's both-path ratio. The step's time before is linear in both (every op waits), so two probes each
    give the coefficients; then a 2 x 2 solve."""
    rows = []
    for phase, (ops, sizes) in steps.items():
        cached = step_us(ops, host, machine, True, True)
        zero = replace(host, runtime=replace(host.runtime, graph_us=0.0))
        base = step_us(ops, zero, machine, False, False)
        per_a = (step_us(ops, replace(host, runtime=replace(host.runtime, graph_us=1.0)), machine, False, False)
                 - base)
        per_b = step_us(with_extra(ops, [float(s) for s in sizes]), zero, machine, False, False) - base
        rows.append((per_a, per_b, IBM[phase][1] * cached - base))
    (a1, b1, c1), (a2, b2, c2) = rows
    det = a1 * b2 - a2 * b1
    return (c1 * b2 - c2 * b1) / det, (a1 * c2 - a2 * c1) / det


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=40)
    ap.add_argument("--card-scale", type=float, nargs="*", default=[12033.5 / 7814.6, 14697.7 / 7814.6])
    args = ap.parse_args()
    host, machine = load_host(), load_machine()
    steps = {phase: sized_ops(phase, args.layers) for phase in ("decode", "prefill")}
    for phase, (ops, sizes) in steps.items():
        launches = [op for op in ops if isinstance(op, Launch)]
        print(f"{phase}: {len(launches)} launches, {sum(op.card_us for op in launches) / 1000:,.1f} ms on the card, "
              f"{sum(isinstance(op, Copy) for op in ops)} copies; instructions per launch: mean "
              f"{sum(sizes) / len(sizes):,.0f}, total {sum(sizes):,}")
    print(f"graph_us {host.runtime.graph_us:.1f} (configs/host.toml, from decode's x2.4):")
    for phase, (ops, _) in steps.items():
        print(line("as simulated", phase, gains(ops, host, machine)))
    ops, sizes = steps["prefill"]
    for scale in args.card_scale:
        print(line(f"prefill card time x{scale:.2f} (the block anchor)", "prefill",
                   gains(_scaled(ops, scale), host, machine)))
    more = SDSC_PER_BLOCK / PROGRAMS_PER_BLOCK
    extra = [host.runtime.graph_us * (more - 1)] * len(sizes)
    print(line(f"prefill launches' graph cost x{more:.2f} (SDSCs per block)", "prefill",
               gains(ops, host, machine, extra)))
    for scale in [1.0, *args.card_scale]:
        scaled = {"decode": steps["decode"], "prefill": (_scaled(ops, scale), sizes)}
        a, b = fit_per_instruction(scaled, host, machine)
        print(f"graph cost a + b x instructions fitted to both phases' x{IBM['decode'][1]} and "
              f"x{IBM['prefill'][1]}, prefill card time x{scale:.2f}: a = {a:.1f} µs, b = {1000 * b:.3f} ns per "
              "instruction")
        fitted = replace(host, runtime=replace(host.runtime, graph_us=a))
        for phase, (phase_ops, phase_sizes) in scaled.items():
            per = [b * n for n in phase_sizes]
            mean = a + sum(per) / len(per)
            print(line(f"{phase}: mean graph cost per launch {mean:.1f} µs", phase,
                       gains(phase_ops, fitted, machine, per)))


def _scaled(ops: list, scale: float) -> list:
    """``ops`` with every launch's card time times ``scale``."""
    return [replace(op, card_us=op.card_us * scale) if isinstance(op, Launch) else op for op in ops]


if __name__ == "__main__":
    main()
