"""A local process pool: independent simulations (the kernel programs of a compiled model, the
points of a sweep) run side by side, one process per CPU.

Each simulation is single-threaded and shares nothing with the others, so processes give a
speed-up of up to the number of CPUs. Workers start from a fork server (a clean process that never
imported torch: forking a process with torch's threads running is unsafe) and are kept for the
next map. ``SPYRE_EMU_WORKERS`` sets their number (default: the CPUs this process may use; 1 runs
everything in this process). Workers import what they run by name and never run the parent's main
script: a user's script without an ``if __name__ == "__main__"`` guard would otherwise compile its
model again in every worker.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
_POOL: list[tuple[int, ProcessPoolExecutor]] = []  # the kept pool and its size


def workers() -> int:
    return max(1, int(os.environ.get("SPYRE_EMU_WORKERS", len(os.sched_getaffinity(0)))))


def parallel_map(fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
    """``[fn(item) for item in items]``, in worker processes when there is more than one item and
    more than one worker; ``fn`` and the items must pickle. Results come back in order."""
    if len(items) < 2 or workers() < 2:
        return [fn(item) for item in items]
    return [f.result() for f in submit(fn, items)]


def submit(fn: Callable[[Any], T], items: Sequence[Any], count: int | None = None) -> list[Future[T]]:
    """``fn(item)`` for every item, submitted to the kept pool of ``count`` workers (default ``workers()``)."""
    with main_hidden():  # workers start as the items are submitted
        pool = _executor(count or workers())
        return [pool.submit(fn, item) for item in items]


def shutdown() -> None:
    while _POOL:
        _POOL.pop()[1].shutdown()


@contextlib.contextmanager
def main_hidden() -> Iterator[None]:
    """While workers start, the main module names no file or module: multiprocessing then gives a new
    worker nothing of it to run."""
    main = sys.modules["__main__"]
    saved = {k: main.__dict__[k] for k in ("__file__", "__spec__") if k in main.__dict__}
    main.__dict__.pop("__file__", None)
    main.__spec__ = None
    try:
        yield
    finally:
        main.__dict__.pop("__spec__", None)
        main.__dict__.update(saved)


def _executor(count: int) -> ProcessPoolExecutor:
    if _POOL and _POOL[0][0] != count:
        shutdown()
    if not _POOL:
        _POOL.append((count, ProcessPoolExecutor(count, mp_context=multiprocessing.get_context("forkserver"))))
    return _POOL[0][1]
