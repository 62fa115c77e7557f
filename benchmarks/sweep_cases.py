"""Print how long the slowest cases of the split sweep take, stage by stage, against a reference.

Run: ``python benchmarks/sweep_cases.py [--reference REV] [--case ROLE,PHASE,B,M,N,K,SB,SM,SN,SK ...]``.
A script, not a test: it prints figures and never asserts a time (docs/speed.md records them).

Each case is ``calibration.matmul_program`` of a row of ``../shared/calibration/matmul_split_sweep.csv``,
lowered and simulated as ``spyre-emu validate`` does (``pipeline.run``, result cache off), in a fresh
child process per checkout with the numba cache warm, best of ``--repeat`` runs. The child prints
the wall time of the case and of its stages (lowering, pack, the event loop, the report), the
simulated latency and the child's peak resident memory; the reference (a git revision, checked out in
a temporary worktree) runs the same cases in its own children, so each line shows both, the speed-up,
and whether the latency is equal.

``--all``: instead, the wall time of the whole sweep set (every row of the CSV) as ``spyre-emu validate``
runs it, ``validation.cases.run_calibration`` in the local process pool (``SPYRE_EMU_WORKERS``, default the CPUs),
result cache off, once per checkout, and whether every case's figures are equal (the cases that differ, named).

``--each``: every row of the sweep on its own, one after another, each in a child forked from one warm process
(so its peak resident memory includes the imports, as a fresh process's would): the slowest rows, the largest
peak, and how many rows take over 10 s or 2 GB (issue 13's per-case bars). This tree only.

``--each --grid``: the same for Granite-3.3-8B's matmuls the sweep does not hold (``OTHER_SHAPES``: the K/V and
MLP down projections, Q·Kᵀ), in every division of the 32 cores into powers of two that divides each dim evenly.
"""

from __future__ import annotations

import argparse
import csv
import importlib
import itertools
import json
import math
import os
import resource
import time
from pathlib import Path

from checkout import child_json, first_module, reference_checkout
from stages import timed_stages

import spyre_emu
from spyre_emu.config import load_machine

calibration = first_module("spyre_emu.validation.calibration", "spyre_emu.calibration")
ROOT = Path(__file__).resolve().parents[1]
SLOWEST = ["mlp_up,prefill,1,512,12800,4096,1,1,1,32", "mlp_up,prefill,1,512,12800,4096,1,32,1,1",
           "mlp_up,decode,1,64,12800,4096,1,32,1,1"]  # the three over 10 s in docs/speed.md
OTHER_SHAPES = {  # (role, phase): (B, M, N, K) of Granite-3.3-8B's matmuls not in the split sweep
    ("kv_proj", "prefill"): (1, 512, 1024, 4096), ("kv_proj", "decode"): (1, 64, 1024, 4096),
    ("mlp_down", "prefill"): (1, 512, 4096, 12800), ("mlp_down", "decode"): (1, 64, 4096, 12800),
    ("attn_qk", "prefill"): (32, 512, 512, 128), ("attn_qk", "decode"): (32, 64, 576, 128)}
STAGES = [("spyre_emu.pipeline", "parse"), ("spyre_emu.engine", "pack"), ("spyre_emu.engine", "_run"),
          ("spyre_emu.pipeline", "build_report")]


def child(case: str, repeat: int) -> dict:
    """Time one case in this process, against the spyre_emu of the checkout on PYTHONPATH."""
    assert Path(spyre_emu.__file__).parents[1] == Path(os.environ["PYTHONPATH"]), spyre_emu.__file__
    spent: dict[str, float] = {}
    timed_stages(STAGES, spent)
    pipeline = importlib.import_module("spyre_emu.pipeline")
    machine = load_machine()
    b, m, n, k, *split = (int(x) for x in case.split(",")[2:])
    best, stages, latency = float("inf"), {}, 0.0
    for _ in range(repeat):
        spent.clear()
        start = time.perf_counter()
        program = pipeline.parse(calibration.matmul_program(b, m, n, k, tuple(split)), machine, "calibration")
        report = pipeline.run(program, machine, cache=False).report
        wall = time.perf_counter() - start
        if wall < best:
            best, stages, latency = wall, dict(spent), report.data["latency_us"]
    return {"wall_s": best, "latency_us": latency, "stages_s": {k: round(v, 3) for k, v in stages.items()},
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024}


def child_all(folder: Path) -> dict:
    """Time the whole sweep set of ``folder`` through validate's parallel path, in this process and its pool."""
    cases_module, pool = first_module("spyre_emu.validation.cases", "spyre_emu.validate"), importlib.import_module(
        "spyre_emu.pool")
    with open(folder / calibration.SWEEP) as f:
        rows = len(list(csv.DictReader(f)))
    cases = calibration.load_cases(folder)[0][:rows]  # the sweep's cases come first, one per row
    start = time.perf_counter()
    points = cases_module.run_calibration(load_machine(), cases)
    return {"wall_s": time.perf_counter() - start, "cases": len(cases), "workers": pool.workers(),
            "latency_us": [p.simulated for p in points], "labels": [f"{c.name} {c.split}" for c in cases]}


def sweep_rows(folder: Path) -> list[dict]:
    with open(folder / calibration.SWEEP) as f:
        return list(csv.DictReader(f))


def grid_rows() -> list[dict]:
    """``OTHER_SHAPES`` in every power-of-two division of 32 cores that divides each dim (and B) evenly."""
    units = importlib.import_module("spyre_emu.validation.workloads").slice_units  # --each runs this tree only
    return [{"role": role, "phase": phase, **dict(zip(("B", "M", "N", "K"), dims, strict=True)),
             **{f"split_{d}": c for d, c in zip("bmnk", split, strict=True)}}
            for (role, phase), dims in OTHER_SHAPES.items()
            for split in itertools.product((1, 2, 4, 8, 16, 32), repeat=4)
            if math.prod(split) == 32 and not any(u % c for u, c in zip(units(*dims), split, strict=True))]


def each_row(rows: list[dict]) -> list[dict]:
    """Every row (a sweep row's columns) in a child forked from this (warm) process: wall time, latency, peak RSS."""
    machine, pipeline = load_machine(), importlib.import_module("spyre_emu.pipeline")
    out = []
    for i, row in enumerate(rows):
        dims = [int(row[key]) for key in ("B", "M", "N", "K", "split_b", "split_m", "split_n", "split_k")]
        program = calibration.matmul_program(*dims[:4], tuple(dims[4:]))
        if i == 0:  # warm: numba's cache loaded before the first child forks
            pipeline.run(pipeline.parse(program, machine, "calibration"), machine, cache=False)
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child never returns into the loop, whatever happens
            code = 1
            try:
                os.close(read)
                start = time.perf_counter()
                report = pipeline.run(pipeline.parse(program, machine, "calibration"), machine, cache=False).report
                os.write(write, json.dumps([time.perf_counter() - start, report.data["latency_us"]]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write)
        with os.fdopen(read) as f:
            text = f.read()
        _, status, usage = os.wait4(pid, 0)
        if status != 0:
            raise SystemExit(f"{row['role']},{row['phase']},{','.join(map(str, dims))} failed in its child")
        wall, latency = json.loads(text)
        out.append({"row": f"{row['role']},{row['phase']}," + ",".join(map(str, dims)), "wall_s": wall,
                    "latency_us": latency, "peak_mb": usage.ru_maxrss // 1024})
    return out


def measure(root: Path, case: str, repeat: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "SPYRE_EMU_RESULT_CACHE": "0"}
    return child_json([__file__, "--child", case, "--repeat", str(repeat)], f"{case} at {root}", cwd=root, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs="+", default=SLOWEST, help="sweep rows: role,phase,B,M,N,K,split_b,m,n,k")
    ap.add_argument("--reference", help="a git revision to compare against (run from a temporary worktree)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--all", action="store_true", help="time the whole sweep set in the process pool instead")
    ap.add_argument("--each", action="store_true", help="time every sweep row on its own (this tree only)")
    ap.add_argument("--grid", action="store_true", help="with --each: Granite's shapes the sweep does not hold")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.grid and not args.each:
        ap.error("--grid goes with --each")
    if args.each:
        each(args.grid)
        return
    if args.child:
        whole = args.child.startswith("all=")  # the data folder of this tree: the reference's may have none
        print(json.dumps(child_all(Path(args.child[4:])) if whole else child(args.child, args.repeat)))
        return
    with reference_checkout(ROOT, args.reference) as ref_root:
        measure(ROOT, args.case[0], 1)  # warm the numba caches of both checkouts
        if ref_root:
            measure(ref_root, args.case[0], 1)
        if args.all:
            whole_set(ROOT, ref_root)
            return
        for case in args.case:
            new = measure(ROOT, case, args.repeat)
            line = f"{case:<44} {new['wall_s']:7.2f} s  {new['latency_us']:10.2f} us"
            if ref_root:
                ref = measure(ref_root, case, args.repeat)
                same = "latency equal" if ref["latency_us"] == new["latency_us"] else \
                    f"LATENCY DIFFERS: reference {ref['latency_us']}"
                line += f"  reference {ref['wall_s']:7.2f} s  speed-up x{ref['wall_s'] / new['wall_s']:.2f}  {same}"
            print(line)
            print(f"{'':<44} stages: " + ", ".join(f"{k} {v:.2f}" for k, v in new["stages_s"].items())
                  + f"; peak {new['peak_mb']} MB")
            if ref_root:
                print(f"{'':<44} reference: " + ", ".join(f"{k} {v:.2f}" for k, v in ref["stages_s"].items()))

def whole_set(root: Path, ref_root: Path | None) -> None:
    new = measure(root, f"all={calibration.DEFAULT_DATA}", 1)
    line = f"whole sweep set: {new['cases']} cases, {new['workers']} workers  {new['wall_s']:7.1f} s"
    print(line, flush=True)
    if ref_root:
        ref = measure(ref_root, f"all={calibration.DEFAULT_DATA}", 1)
        pairs = zip(new.get("labels", ref.get("labels", [])), new["latency_us"], ref["latency_us"], strict=True)
        differ = [(label, a, b) for label, a, b in pairs if a != b]
        same = "figures equal" if not differ else f"FIGURES DIFFER in {len(differ)} of {new['cases']} cases"
        line += f"  reference {ref['wall_s']:7.1f} s  speed-up x{ref['wall_s'] / new['wall_s']:.2f}  {same}"
    print(line)
    if ref_root and differ:
        print("the cases that differ (this tree against the reference, µs):")
        for label, a, b in differ:
            print(f"  {label:<60} {a:12.2f} {b:12.2f}  {100 * (a - b) / b:+.2f} %")


def each(grid: bool) -> None:
    """Print ``--each``'s figures: the 10 slowest rows, the largest peak, the rows over the bars."""
    rows = each_row(grid_rows() if grid else sweep_rows(calibration.DEFAULT_DATA))
    rows.sort(key=lambda r: -r["wall_s"])
    what = "division of the shapes the sweep does not hold" if grid else "sweep row"
    print(f"every {what} on its own: {len(rows)} rows, {sum(r['wall_s'] for r in rows):.1f} s in all")
    for r in rows[:10]:
        print(f"  {r['row']:<44} {r['wall_s']:7.2f} s  {r['latency_us']:10.2f} us  peak {r['peak_mb']} MB")
    top = max(rows, key=lambda r: r["peak_mb"])
    print(f"largest peak {top['peak_mb']} MB ({top['row']}); over 10 s: {sum(r['wall_s'] > 10 for r in rows)} rows; "
          f"over 2 GB: {sum(r['peak_mb'] > 2048 for r in rows)} rows")


if __name__ == "__main__":
    main()
