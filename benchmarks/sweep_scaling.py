"""Print how a sweep scales with local workers, and what it costs per point over the simulations.

Run: ``python benchmarks/sweep_scaling.py [--workers 2]``. A script, not a test: it prints figures
and never asserts a time (docs/sweeps.md records the measurements).

The space: 64 points, a [64, 2048] x [2048, 2048] matmul over 4 x 4 work divisions and 4 DRAM
interleaves (each point a whole kernel program, about a few tenths of a second to simulate). In one
process, in this order:
- the reference: the 64 points simulated one after another by the task itself, no sweep machinery
  (after one untimed warm-up run, so numba's loading is not in it);
- ``sweep`` with 1 worker (in this process) and with ``--workers`` local processes, result cache off.
It prints each wall time, the overhead per point of the 1-worker sweep over the reference (as a
share of the mean simulation time of a point) and the speed-up of the parallel sweep.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout, whatever the current directory

from spyre_emu.sweep import MatmulTask, expand, grid_search, sweep  # noqa: E402
from spyre_emu.sweep.executors import run_batch  # noqa: E402

SPACE = {"split_m": grid_search([1, 2, 4, 8]), "split_n": grid_search([1, 2, 4, 8]),
         "dram.interleave_bytes": grid_search([256, 512, 1024, 2048])}
FIXED = {"M": 64, "N": 2048, "K": 2048}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    os.environ["SPYRE_EMU_RESULT_CACHE"] = "0"
    task = MatmulTask()
    points = [{**FIXED, **p} for p in expand(SPACE)]
    run_batch((task, points[:1]))  # warm the engine in this process
    start = time.perf_counter()
    reference = [task(p) for p in points]
    direct_s = time.perf_counter() - start
    start = time.perf_counter()
    one = sweep(SPACE, task, fixed=FIXED, workers=1, cache=False, progress=False)
    one_s = time.perf_counter() - start
    start = time.perf_counter()
    many = sweep(SPACE, task, fixed=FIXED, workers=args.workers, cache=False, progress=False)
    many_s = time.perf_counter() - start
    same = [r for r in one.table.records()] == [r for r in many.table.records()] and \
        [{k: r[k] for k in reference[0]} for r in one.table.records()] == reference
    per_point = direct_s / len(points)
    print(f"{len(points)} points, {per_point:.3f} s of simulation per point (the task alone, one after another)")
    print(f"reference (the task in a loop)   {direct_s:7.2f} s")
    print(f"sweep, 1 worker                  {one_s:7.2f} s  overhead {(one_s - direct_s) / len(points) * 1e3:6.1f} ms "
          f"per point = {100 * (one_s - direct_s) / direct_s:5.1f} % of a point's simulation")
    print(f"sweep, {args.workers} local workers          {many_s:7.2f} s  speed-up x{one_s / many_s:.2f} over 1 worker "
          f"({many.stats.summary()})")
    print("tables identical to the reference: " + ("yes" if same else "NO"))


if __name__ == "__main__":
    main()
