"""``sweep``: expand a space, skip the points already done, run the rest in batches, gather one table.

Points are checked before anything runs (an unknown key or a value the machine or the task refuses
is a one-line error), then grouped into batches, about sixteen per worker: per-task overhead is paid
per batch, and the last batches are short enough that no worker idles long at the end. Each point's
figures are kept in the result cache (memo.py) under a hash of the task, the files it reads, the
point and the simulator's code: a sweep run again, or grown, simulates only the new points.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .. import memo, pool
from ..errors import ConfigError
from .executors import Batch, run_batches
from .space import expand
from .table import Table, table_of
from .tasks import Task, is_machine_key

BATCHES_PER_WORKER = 16


@dataclass(frozen=True)
class Stats:
    """How the sweep ran (wall-clock figures, kept out of the table so that it stays deterministic)."""

    points: int
    cached: int
    wall_s: float
    warm_s: dict[int, float] = field(default_factory=dict)  # per worker process: its engine warm-up
    run_s: float = 0.0  # summed over batches, warm-ups excluded

    def summary(self) -> str:
        ran = self.points - self.cached
        steady = f"{self.run_s / ran:.3f} s per point" if ran else "nothing simulated"
        warm = f"warm-up {max(self.warm_s.values()):.2f} s in each of {len(self.warm_s)} worker(s)" if self.warm_s \
            else "no warm-up"
        return f"{self.points} points ({self.cached} from the cache) in {self.wall_s:.1f} s: {warm}, {steady}"


@dataclass(frozen=True)
class Sweep:
    table: Table
    stats: Stats


def sweep(space: dict[str, Any], task: Task, *, fixed: dict[str, Any] | None = None, num_samples: int = 1,
          seed: int = 0, executor: str = "local", workers: int | None = None, address: str | None = None,
          cache: bool = True, progress: bool = True) -> Sweep:
    """Simulate every point of ``space`` (with the ``fixed`` values) as ``task`` says, on ``executor``."""
    start = time.perf_counter()
    fixed = fixed or {}
    clash = sorted(set(fixed) & set(space))
    if clash:
        raise ConfigError("a key is both fixed and swept", None, clash[0])
    points = [{**fixed, **p} for p in expand(space, num_samples, seed)]
    for key in {k: None for p in points for k in p}:  # each key's values, checked once per distinct value
        for value in {repr(p[key]): p[key] for p in points if key in p}.values():
            task.check_keys({key: value}, "fixed" if key in fixed else "space")
    task.require({k: v for k, v in points[0].items() if not is_machine_key(k)})
    fingerprint = task.fingerprint()
    keys = [memo.key(b"sweep", fingerprint, repr(sorted(p.items())).encode()) for p in points]
    figures: list[dict[str, Any] | None] = [memo.lookup(k) if cache else None for k in keys]
    todo = [i for i, f in enumerate(figures) if f is None]
    count = workers or pool.workers()
    batches = _batches(todo, count)
    jobs = [(task, [points[i] for i in b]) for b in batches]
    warm: dict[int, float] = {}
    run_s = 0.0
    for index, batch in _progress(run_batches(executor, jobs, count, address), len(jobs), progress):
        for i, row in zip(batches[index], batch.rows, strict=True):
            figures[i] = row
            if cache:
                memo.store(keys[i], row)
        if batch.warm_s:
            warm[batch.pid] = batch.warm_s
        run_s += batch.run_s
    stats = Stats(len(points), len(points) - len(todo), time.perf_counter() - start, warm, run_s)
    return Sweep(table_of(points, figures), stats)


def _batches(todo: list[int], workers: int) -> list[list[int]]:
    """Consecutive runs of the points to do, about ``BATCHES_PER_WORKER`` per worker."""
    n = max(1, min(len(todo), workers * BATCHES_PER_WORKER))
    size = -(-len(todo) // n) if todo else 1
    return [todo[i:i + size] for i in range(0, len(todo), size)]


def _progress(items: Iterator[tuple[int, Batch]], total: int, show: bool) -> Iterator[tuple[int, Batch]]:
    """Batches as they finish, with a bar on a terminal (tqdm draws nothing when stderr is not one)."""
    from tqdm import tqdm  # noqa: PLC0415
    with tqdm(items, total=total, unit="batch", disable=None if show else True, file=sys.stderr,
              leave=False) as bar:
        yield from bar
