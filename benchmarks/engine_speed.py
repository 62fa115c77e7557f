"""Print how fast the engine simulates: cycles and sticks per wall second, compile and CLI start.

Run: ``python benchmarks/engine_speed.py [--reference REV] [--rounds N]``. A script, not a test: it
prints figures and never asserts a time (CI must not fail on wall time; the targets are issue 13's).

What it measures, all with ``time.perf_counter``, in a child process per checkout (this tree and,
with ``--reference``, a git revision checked out in a temporary worktree; ``--rounds`` runs both
that many times, alternately, and keeps each row's fastest, so both see the same machine load):
- per program, ``spyre_emu.engine.simulate`` (pack, jitted loop, event log) on a warm numba
  cache: one untimed run to warm up, then the best of three; the programs are the example
  ``stream_read_64mb``, the same at 1/8, a hand-written compute-bound program (64 PT arrays x 200
  passes, operands in LX) and what a user runs: ``spyre-emu gemm`` of a 512 x 4096 x 4096 fp16
  prefill matmul on 32 cores, lowered (with ``repeat`` passes) as that command lowers it;
- where that time goes: ``pack`` and the jitted loop ``run_nb`` alone, each best of three (engine
  internals, named here on purpose), and the time to build the program (parse or lower: the
  program's instruction columns are built there, once);
- start-up, per checkout, wall and CPU seconds of a child process (the rounds alternate the checkouts;
  each row keeps its fastest): the cold compile (a fresh process with ``SPYRE_EMU_CACHE`` pointing at an
  empty directory imports the engine and simulates a one-instruction program: interpreter start, imports
  and numba compilation), the same command again with that cache now warm; the README's first command
  (``spyre-emu run examples/programs/stream_read_64mb.json``) into an empty ``SPYRE_EMU_CACHE``, as a new
  user's first run; then the CLI's warm start, ``spyre-emu run examples/programs/ring_move_128k.json
  --quiet``, with its result in the result cache (a program run before) and with ``SPYRE_EMU_RESULT_CACHE=0``
  (it simulates). The CLI runs as ``python -m spyre_emu.cli`` in the checkout, for both checkouts alike.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHECKOUT = Path(os.environ.get("ENGINE_SPEED_CHECKOUT", ROOT))  # the tree a child measures
sys.path.insert(0, str(CHECKOUT))

import numba  # noqa: E402
from checkout import child_json, reference_checkout  # noqa: E402

import spyre_emu  # noqa: E402
from spyre_emu import load_machine, load_program  # noqa: E402
from spyre_emu.engine import simulate  # noqa: E402
from spyre_emu.engine.loop import run_nb, start_nb  # noqa: E402
from spyre_emu.results import build_report  # noqa: E402
from spyre_emu.unit_program import parse_unit_program  # noqa: E402

MB = 1 << 20
STREAM = CHECKOUT / "examples" / "programs" / "stream_read_64mb.json"
CLI_PROGRAM = Path("examples") / "programs" / "ring_move_128k.json"  # in the checkout measured
README_PROGRAM = Path("examples") / "programs" / "stream_read_64mb.json"  # the README's first command
TARGETS = {"memory": 1e7, "compute": 1e8}  # simulated cycles per wall second, issue 13
GEMM = (512, 4096, 4096, 32)  # m, n, k, cores: a prefill projection of an 8B model

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


def measure(label: str, kind: str, build) -> dict:
    """One program: building it (``build()``), simulate() as a whole, pack and the loop alone, in seconds."""
    machine = load_machine()
    start = time.perf_counter()
    program = build(machine)
    built = time.perf_counter() - start
    wall, log = best_of(lambda: simulate(program, machine))
    report = build_report(log, machine, program.source).data
    pack = importlib.import_module("spyre_emu.engine.pack").pack  # the module, not engine.pack()
    pack_s = best_of(lambda: pack(program, machine, 1 << 62))[0]
    loop_s = float("inf")
    for _ in range(3):
        state = pack(program, machine, 1 << 62).state  # the loop runs a state once
        start = time.perf_counter()
        start_nb(state)
        run_nb(state, 0, 1 << 62)  # no event budget: one call runs to the end
        loop_s = min(loop_s, time.perf_counter() - start)
    return {"label": label, "kind": kind, "cycles": report["total_cycles"], "wall": wall, "pack": pack_s,
            "loop": loop_s, "build": built, "instructions": len(log.instructions),
            "hops": report["ring"]["stick_hops"], "delivered": report["units"]["dma"]["sticks"]}


def lowered_gemm(machine):
    """The unit program ``spyre-emu gemm`` simulates for GEMM (gemm.run_gemm, without the run)."""
    gemm = importlib.import_module("spyre_emu.gemm")
    lower = importlib.import_module("spyre_emu.lowering").lower
    parse_kernels = importlib.import_module("spyre_emu.kernel_program").parse_kernel_program
    m, n, k, cores = GEMM
    source = f"gemm m={m} n={n} k={k}"
    split = gemm.work_division(m, n, cores, source)
    return lower(parse_kernels(gemm.kernel_program(m, n, k, "fp16", split), source), machine)


PROGRAMS = [  # label, kind (a key of TARGETS), how to build it
    ("memory-bound: stream_read_64mb", "memory", lambda m: load_program(STREAM, m)),
    ("memory-bound: same at 1/8 (8 MB)", "memory",
     lambda m: parse_unit_program(stream_program(8 * MB), m, "stream_read_8mb")),
    ("compute-bound: 64 PT arrays x 200 passes", "compute",
     lambda m: parse_unit_program(compute_program(), m, "pt_200_passes_k1024")),
    ("lowered: gemm 512x4096x4096 fp16, 32 cores", "compute", lowered_gemm),
]


def child() -> None:
    """Measure every program in the checkout this process imported; print one JSON line."""
    assert Path(spyre_emu.__file__).resolve().parents[1] == CHECKOUT.resolve(), spyre_emu.__file__
    print(json.dumps([measure(label, kind, build) for label, kind, build in PROGRAMS]))


def run_child(checkout: Path) -> list[dict]:
    env = {**os.environ, "ENGINE_SPEED_CHECKOUT": str(checkout)}
    return child_json([__file__, "--child"], f"the benchmark at {checkout}", cwd=checkout, env=env)


def fastest(runs: list[list[dict]]) -> list[dict]:
    """Per program, the run with the least simulate() time (stage times from that run)."""
    return [min(rows, key=lambda r: r["wall"]) for rows in zip(*runs, strict=True)]


def show(rows: list[dict], ref: list[dict] | None) -> None:
    print("engine runs (simulate(): pack + jitted loop + event log), warm cache, best of 3 after a warm-up:")
    for i, row in enumerate(rows):
        rate = row["cycles"] / row["wall"]
        target = TARGETS[row["kind"]]
        print(f"  {row['label']:<44}{row['cycles']:>10,} cycles {row['wall']:>9.4f} s {rate:>10.3e} cycles/s"
              f" = {rate / target:.3g}x the {row['kind']}-bound target {target:.0e}")
        print(f"  {'':<44}pack {row['pack']:.4f} s, jitted loop {row['loop']:.4f} s "
              f"({row['cycles'] / row['loop']:.3e} cycles/s in the loop alone), {row['instructions']:,} "
              f"instructions, built (parse or lower) in {row['build']:.3f} s")
        if ref:
            r = ref[i]
            same = "cycles equal" if r["cycles"] == row["cycles"] else f"CYCLES DIFFER: reference {r['cycles']:,}"
            print(f"  {'':<44}reference: {r['wall']:.4f} s (pack {r['pack']:.4f}, loop {r['loop']:.4f}, "
                  f"built in {r['build']:.3f}): speed-up x{r['wall'] / row['wall']:.2f}, {same}")


def run_timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of the child process running ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


STARTS = [  # key, what is timed
    ("cold", "cold compile, empty SPYRE_EMU_CACHE (python -c: imports + numba compile + 1-instruction run)"),
    ("warm", "  same command, cache now warm"),
    ("readme", f"README's first command into an empty SPYRE_EMU_CACHE (spyre-emu run {README_PROGRAM})"),
    ("cli_hit", f"CLI warm start, result in the result cache (spyre-emu run {CLI_PROGRAM} --quiet)"),
    ("cli_sim", "CLI warm start, same, SPYRE_EMU_RESULT_CACHE=0 (imports, numba cache load, simulation)"),
]


def starts(tree: Path) -> dict[str, tuple[float, float]]:
    """One round of a checkout's start-up figures, each (wall, CPU) seconds, in fresh cache folders."""
    cli = [sys.executable, "-m", "spyre_emu.cli", "run"]
    out = {}
    with tempfile.TemporaryDirectory(prefix="spyre-emu-cold-") as cache:
        env = {**os.environ, "SPYRE_EMU_CACHE": cache}
        cmd = [sys.executable, "-c", COLD_SNIPPET]
        out["cold"], out["warm"] = run_timed(cmd, tree, env), run_timed(cmd, tree, env)
    with tempfile.TemporaryDirectory(prefix="spyre-emu-cold-") as cache:
        env = {**os.environ, "SPYRE_EMU_CACHE": cache, "SPYRE_EMU_RESULT_CACHE": "1"}  # on, whatever the shell says
        out["readme"] = run_timed([*cli, str(README_PROGRAM)], tree, env)
        cmd = [*cli, str(CLI_PROGRAM), "--quiet"]
        run_timed(cmd, tree, env)  # its result into the result cache, and the OS file cache warm
        out["cli_hit"] = min(run_timed(cmd, tree, env) for _ in range(3))
        off = {**env, "SPYRE_EMU_RESULT_CACHE": "0"}
        out["cli_sim"] = min(run_timed(cmd, tree, off) for _ in range(3))
    return out


def show_starts(runs: list[dict], ref_runs: list[dict]) -> None:
    print(f"start-up, wall / CPU seconds of the child, fastest of {len(runs)} round(s)"
          + (" alternating with the reference:" if ref_runs else ":"))
    for key, label in STARTS:
        wall, cpu = min(r[key][0] for r in runs), min(r[key][1] for r in runs)
        line = f"  {label}: {wall:.2f} / {cpu:.2f} s"
        if ref_runs:
            rwall, rcpu = min(r[key][0] for r in ref_runs), min(r[key][1] for r in ref_runs)
            line += f"; reference {rwall:.2f} / {rcpu:.2f} s: x{rwall / wall:.2f} wall, x{rcpu / cpu:.2f} CPU"
        print(line)


def alternate(measure: Callable[[Path], Any], rounds: int, ref_root: Path | None) -> tuple[list, list]:
    """``measure`` on this tree and on the reference (if any), alternately, ``rounds`` times each: both see the
    same machine load."""
    ours, theirs = [], []
    for _ in range(rounds):
        ours.append(measure(ROOT))
        if ref_root:
            theirs.append(measure(ref_root))
    return ours, theirs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference", help="a git revision to compare against (run from a temporary worktree)")
    ap.add_argument("--rounds", type=int, default=1, help="run this tree and the reference N times, alternately")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child()
        return
    print(f"spyre-emu engine speed: Python {platform.python_version()}, numba {numba.__version__}, "
          f"{os.cpu_count()} CPUs ({platform.processor() or platform.machine()}), load average "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    with reference_checkout(ROOT, args.reference) as ref_root:
        runs, ref_runs = alternate(run_child, args.rounds, ref_root)
        start_runs, ref_start_runs = alternate(starts, args.rounds, ref_root)
    rows = fastest(runs)
    show(rows, fastest(ref_runs) if args.reference else None)
    print(f"  (load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())})")
    stream, small = rows[0], rows[1]
    moved = stream["hops"] + stream["delivered"]
    print(f"  stick-transfers of stream_read_64mb: {stream['hops']:,} ring stick-hops (report ring.stick_hops) "
          f"+ {stream['delivered']:,} sticks delivered into LX (units.dma.sticks) = {moved / stream['wall']:.3e}/s")
    print(f"  scaling 8 MB -> 64 MB: {stream['cycles'] / small['cycles']:.2f}x cycles, "
          f"{stream['wall'] / small['wall']:.2f}x wall time, "
          f"{moved / (small['hops'] + small['delivered']):.2f}x stick-transfers")
    print()
    show_starts(start_runs, ref_start_runs)


if __name__ == "__main__":
    main()
