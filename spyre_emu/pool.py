"""A local process pool: independent simulations (the kernel programs of a compiled model, the
points of a sweep) run side by side, one process per CPU.

Each simulation is single-threaded and shares nothing with the others, so processes give a
speed-up of up to the number of CPUs. Workers start from a fork server (a clean process that never
imported torch: forking a process with torch's threads running is unsafe) and are kept for the
next map. ``SPYRE_EMU_WORKERS`` sets their number (default: the CPUs this process may use; 1 runs
everything in this process).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")
_POOL: list[ProcessPoolExecutor] = []


def workers() -> int:
    return max(1, int(os.environ.get("SPYRE_EMU_WORKERS", len(os.sched_getaffinity(0)))))


def parallel_map(fn: Callable[[Any], T], items: Sequence[Any]) -> list[T]:
    """``[fn(item) for item in items]``, in worker processes when there is more than one item and
    more than one worker; ``fn`` and the items must pickle. Results come back in order."""
    if len(items) < 2 or workers() < 2:
        return [fn(item) for item in items]
    return list(_executor().map(fn, items))


def shutdown() -> None:
    while _POOL:
        _POOL.pop().shutdown()


def _executor() -> ProcessPoolExecutor:
    if not _POOL:
        _POOL.append(ProcessPoolExecutor(workers(), mp_context=multiprocessing.get_context("forkserver")))
    return _POOL[0]
