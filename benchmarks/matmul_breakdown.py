"""Where a matmul division's card time goes: bytes and DMA pieces per operand, unit busy time, DRAM, PT.

Run: ``python benchmarks/matmul_breakdown.py B,M,N,K:b,m,n,k [...]`` (dims, then the division: b, m, n in
sticks, k), e.g. ``32,512,512,128:1,4,8,1`` for Granite-3.3-8B's Q·Kᵀ prefill. A script, not a test: it
prints one line of figures per case and asserts nothing (docs/decisions/fidelity.md, session 40, records them).

Each case is ``workloads.matmul_program`` lowered and simulated as ``spyre-emu validate`` does (``pipeline.run``,
result cache off). From the unit program: per operand, the bytes its load or store instructions move against
the operand's size (how many times it crosses DRAM) and its pieces (a strided instruction's ``bytes / piece``;
each pays ``dma.piece_setup_cycles``), the most any one core moves and their sizes in sticks. From the report:
the card time against the two floors (A, B read and C written once at the DRAM peak; the MACs at the PT peak
of the cores the division uses), PT utilization, each DMA kind's busy µs per core, DRAM GB/s and row hits,
misses and conflicts per channel.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict

from spyre_emu import pipeline
from spyre_emu.config import STICK_BYTES, load_machine
from spyre_emu.validation import workloads


def breakdown(dims: tuple[int, int, int, int], split: tuple[int, int, int, int]) -> dict:
    """The figures of one case (see the module's docstring)."""
    b, m, n, k = dims
    machine = load_machine()
    program = pipeline.parse(workloads.matmul_program(b, m, n, k, split), machine, "breakdown")
    data = pipeline.run(program, machine, cache=False).report.data
    units = program.units
    sizes = {"A": b * m * k * 2, "B": b * k * n * 2, "C": b * m * n * 2}
    moved: dict[str, list] = defaultdict(lambda: [0, Counter(), Counter()])  # bytes, pieces by size, by core
    for (core, _unit), stream in units.streams.items():
        for ins in stream:
            if ins.op not in ("load", "store"):
                continue
            at = int(ins.args["dram"])
            name = next(nm for nm, buf in units.buffers.items() if buf.addr <= at < buf.addr + buf.nbytes)
            size, piece = int(ins.args["bytes"]), int(ins.args.get("piece", ins.args["bytes"]))
            entry = moved[f"{name} {ins.op}"]
            entry[0] += size
            entry[1][piece // STICK_BYTES] += size // piece
            entry[2][core] += size // piece
    clock, kernel = data["clock_ghz"], data["kernels"][0]
    floor_cycles = max(sum(sizes.values()) / machine.dram.peak_bytes_per_cycle(), kernel["ideal_cycles_by"]["pt"])
    floor = floor_cycles / (clock * 1e3)
    card_us = data["card_cycles"] / (clock * 1e3)
    channels = data["dram"]["channels"]
    return {
        "case": f"[{b},{m},{k}]x[{b},{k},{n}] at {split}", "card_us": round(card_us, 1), "floor_us": round(floor, 1),
        "x_floor": round(card_us / floor, 2), "pt_utilization": kernel["pt_utilization"],
        "operands": {op: {"times_its_size": round(v[0] / sizes[op[0]], 2), "pieces": sum(v[1].values()),
                          "most_per_core": max(v[2].values()), "sticks_per_piece": dict(sorted(v[1].items()))}
                     for op, v in sorted(moved.items())},
        "busy_us_per_core": {u: round(v["busy_cycles"] / v["units_used"] / (clock * 1e3), 1)
                             for u, v in kernel["units"].items()},
        "dram": {"gb_per_s": data["dram"]["gb_per_s"],
                 **{f"{kind}_per_channel": sum(c[kind] for c in channels) // len(channels)
                    for kind in ("row_hits", "row_misses", "row_conflicts")}}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="+", help="B,M,N,K:b,m,n,k")
    for case in parser.parse_args().cases:
        dims, split = (tuple(int(x) for x in part.split(",")) for part in case.split(":"))
        print(json.dumps(breakdown(dims, split)), flush=True)


if __name__ == "__main__":
    main()
