"""Print how fast the engine simulates: cycles and sticks per wall second, compile and CLI start.

Run: ``python benchmarks/engine_speed.py``. A script, not a test: it prints figures and never
asserts a time (CI must not fail on wall time; DESIGN.md section 5 gives the targets).

What it measures, all with ``time.perf_counter``:
- per program, ``spyre_emu.engine.simulate`` (pack, jitted loop, event log) on a warm numba
  cache: one untimed run to warm up, then the best of three;
- where that time goes: ``pack`` (Python, per instruction) and the jitted loop ``run_nb`` alone,
  each best of three (these two are engine internals, named here on purpose);
- the cold compile: a fresh process with ``SPYRE_EMU_CACHE`` pointing at an empty directory
  imports the engine and simulates a one-instruction program (so: interpreter start, imports
  and numba compilation), then the same command again with that cache now warm;
- the CLI's warm start: ``spyre-emu run examples/programs/ring_move_128k.json --quiet``.
"""

from __future__ import annotations

import importlib
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout, whatever the current directory

import numba  # noqa: E402

from spyre_emu import load_machine, load_program  # noqa: E402
from spyre_emu.engine import simulate  # noqa: E402
from spyre_emu.engine.loop import run_nb, start_nb  # noqa: E402
from spyre_emu.results import build_report  # noqa: E402
from spyre_emu.unit_program import parse_unit_program  # noqa: E402

MB = 1 << 20
STREAM = ROOT / "examples" / "programs" / "stream_read_64mb.json"
CLI_PROGRAM = ROOT / "examples" / "programs" / "ring_move_128k.json"
TARGETS = {"memory": 5e6, "compute": 1e8}  # simulated cycles per wall second, DESIGN.md section 5

TINY = ('{"format": "spyre-emu.unit-program", "version": 1, "cores": [{"core": 0, "units": '
        '{"sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 1}]}}]}')
COLD_SNIPPET = (
    "import json, sys; sys.path.insert(0, '.');"
    "from spyre_emu.config import load_machine;"
    "from spyre_emu.unit_program import parse_unit_program;"
    "from spyre_emu.engine import simulate;"
    "m = load_machine();"
    f"simulate(parse_unit_program(json.loads({TINY!r}), m), m)"
)


def stream_program(total_bytes: int, cores: int = 32) -> dict:
    """Like examples/make_programs.py stream_read: each core loads its share of one tensor."""
    share = total_bytes // cores
    return {"format": "spyre-emu.unit-program", "version": 1, "buffers": {"x": {"bytes": total_bytes}},
            "cores": [{"core": c, "units": {"load": [{"op": "load", "dram": f"x+{c * share}", "lx": 0,
                                                      "bytes": share}]}} for c in range(cores)]}


def compute_program(passes: int = 200, k: int = 1024, cores: int = 32) -> dict:
    """Every corelet runs ``passes`` PT passes of 8 x k x 64 on LX-resident operands; no DMA."""
    a_bytes, b_bytes, c_bytes = 8 * k * 2, k * 128, 8 * 128
    per_corelet = a_bytes + b_bytes + c_bytes
    units = {}
    for corelet in (0, 1):
        base = corelet * per_corelet
        units[f"pt{corelet}"] = [{"op": "matmul", "a": base, "b": base + a_bytes, "c": base + a_bytes + b_bytes,
                                  "rows": 8, "k": k, "accumulate": True} for _ in range(passes)]
    return {"format": "spyre-emu.unit-program", "version": 1,
            "cores": [{"core": c, "units": units} for c in range(cores)]}


def best_of(fn, repeat: int = 3) -> tuple[float, object]:
    """Run ``fn`` once untimed (warm-up), then return the best of ``repeat`` timed runs and a result."""
    result = fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def time_engine(label: str, program, machine) -> dict:
    wall, log = best_of(lambda: simulate(program, machine))
    report = build_report(log, machine, program.source).data
    cycles = report["total_cycles"]
    row = {"label": label, "cycles": cycles, "wall": wall, "rate": cycles / wall,
           "hops": report["ring"]["stick_hops"], "delivered": report["units"]["dma"]["sticks"]}
    print(f"  {label:<42}{cycles:>12,} cycles {wall:>9.4f} s {row['rate']:>12.3e} cycles/s")
    return row


def time_split(row: dict, program, machine) -> None:
    """Best-of-3 seconds of ``pack`` and of the jitted loop alone, for the same program."""
    pack = importlib.import_module("spyre_emu.engine.pack").pack  # the module, not engine.pack()
    pack_s = best_of(lambda: pack(program, machine, 1 << 62))[0]
    loop_s = float("inf")
    for _ in range(3):
        state = pack(program, machine, 1 << 62).state  # the loop runs a state once
        start = time.perf_counter()
        start_nb(state)
        run_nb(state, 0, 1 << 62)  # no event budget: one call runs to the end
        loop_s = min(loop_s, time.perf_counter() - start)
    print(f"  {row['label']}: pack {pack_s:.4f} s, jitted loop {loop_s:.4f} s "
          f"({row['cycles'] / loop_s:.3e} cycles/s in the loop alone)")


def print_sticks(row: dict) -> None:
    moved = row["hops"] + row["delivered"]
    print(f"  stick-transfers: {row['hops']:,} ring stick-hops (report ring.stick_hops: one per stick per link)")
    print(f"    + {row['delivered']:,} sticks delivered into LX (report units.dma.sticks)")
    print(f"    = {moved:,} in {row['wall']:.4f} s = {moved / row['wall']:.3e} stick-transfers/s")


def run_timed(cmd: list[str], env: dict[str, str] | None = None) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def cold_compile() -> tuple[float, float]:
    """(seconds with an empty numba cache, seconds for the same command with the cache warm)."""
    with tempfile.TemporaryDirectory(prefix="spyre-emu-cold-") as cache:
        env = {**os.environ, "SPYRE_EMU_CACHE": cache}
        cmd = [sys.executable, "-c", COLD_SNIPPET]
        return run_timed(cmd, env), run_timed(cmd, env)


def cli_start() -> float:
    exe = Path(sys.executable).with_name("spyre-emu")
    cmd = [str(exe)] if exe.exists() else [sys.executable, "-m", "spyre_emu.cli"]
    cmd += ["run", str(CLI_PROGRAM.relative_to(ROOT)), "--quiet"]
    run_timed(cmd)  # warm-up: the numba cache and the OS file cache
    return min(run_timed(cmd) for _ in range(3))


def main() -> None:
    machine = load_machine()
    print(f"spyre-emu engine speed: Python {platform.python_version()}, numba {numba.__version__}, "
          f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()})")
    print("engine runs (simulate(): pack + jitted loop + event log), warm cache, best of 3 after a warm-up:")
    stream_program_ = load_program(STREAM, machine)
    compute_program_ = parse_unit_program(compute_program(), machine, "pt_200_passes_k1024")
    stream = time_engine("memory-bound: stream_read_64mb", stream_program_, machine)
    small = time_engine("memory-bound: same at 1/8 (8 MB)",
                        parse_unit_program(stream_program(8 * MB), machine, "stream_read_8mb"), machine)
    compute = time_engine("compute-bound: 64 PT arrays x 200 passes", compute_program_, machine)
    print("where the time goes (best of 3 each):")
    time_split(stream, stream_program_, machine)
    time_split(compute, compute_program_, machine)
    print()
    print_sticks(stream)
    print()
    for row, kind in ((stream, "memory"), (compute, "compute")):
        print(f"  {kind}-bound target >= {TARGETS[kind]:.0e} cycles/s: measured {row['rate']:.3e} "
              f"({row['rate'] / TARGETS[kind]:.3g}x the target)")
    print(f"  scaling 8 MB -> 64 MB: {stream['cycles'] / small['cycles']:.2f}x cycles, "
          f"{stream['wall'] / small['wall']:.2f}x wall time, "
          f"{(stream['hops'] + stream['delivered']) / (small['hops'] + small['delivered']):.2f}x stick-transfers")
    print()
    cold, warm = cold_compile()
    print(f"cold start, empty SPYRE_EMU_CACHE (python -c: imports + numba compile + 1-instruction run): {cold:.2f} s")
    print(f"  same command, cache now warm: {warm:.2f} s (compile share about {cold - warm:.2f} s)")
    print(f"CLI warm start (spyre-emu run {CLI_PROGRAM.relative_to(ROOT)} --quiet), best of 3: {cli_start():.2f} s")


if __name__ == "__main__":
    main()
