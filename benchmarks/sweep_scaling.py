"""Print how a sweep scales with local workers, and what it costs per point over the simulations.

Run: ``python benchmarks/sweep_scaling.py [--workers 2]``. A script, not a test: it prints figures
and never asserts a time (docs/sweeps.md records the measurements).

The space: 64 points, a [64, 4096] x [4096, 4096] matmul (Granite-3.3-8B's Q/O projection in
decode) over 4 x 4 work divisions and 4 DRAM interleaves, each point a whole kernel program of about
a second. In one process: ``sweep`` with 1 worker (in this process: the reference), then with
``--workers`` local processes (result cache off). It prints both wall times, the speed-up, and the
1-worker sweep's overhead: its wall time less the time spent inside the task's simulations
(``stats.run_s``) and the warm-up, per point and as a share of a point's simulation.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout, whatever the current directory

from spyre_emu.sweep import MatmulTask, grid_search, sweep  # noqa: E402

SPACE = {"split_m": grid_search([1, 2, 4, 8]), "split_n": grid_search([1, 2, 4, 8]),
         "dram.interleave_bytes": grid_search([256, 512, 1024, 2048])}
FIXED = {"M": 64, "N": 4096, "K": 4096}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    task = MatmulTask()
    start = time.perf_counter()
    one = sweep(SPACE, task, fixed=FIXED, workers=1, cache=False, progress=False)
    one_s = time.perf_counter() - start
    start = time.perf_counter()
    many = sweep(SPACE, task, fixed=FIXED, workers=args.workers, cache=False, progress=False)
    many_s = time.perf_counter() - start
    points = one.stats.points
    per_point = one.stats.run_s / points
    overhead = one_s - one.stats.run_s - sum(one.stats.warm_s.values())
    print(f"{points} points, {per_point:.3f} s of simulation per point")
    print(f"sweep, 1 worker (reference)      {one_s:7.2f} s  overhead {overhead / points * 1e3:6.1f} ms per point "
          f"= {100 * overhead / one.stats.run_s:4.1f} % of a point's simulation")
    print(f"sweep, {args.workers} local workers          {many_s:7.2f} s  speed-up x{one_s / many_s:.2f} "
          f"({many.stats.summary()})")
    print("tables identical: " + ("yes" if one.table == many.table else "NO"))


if __name__ == "__main__":
    main()
