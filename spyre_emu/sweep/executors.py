"""Where a sweep's batches run: local processes (default), a Ray cluster, or a Dask cluster.

Every executor runs the same function, ``run_batch``, on the same batches, imported by name on the
worker (never a pickled jitted function), so every executor gives the same rows. The first batch a
worker process runs first warms the engine (numba loads it from the shared on-disk cache, or
compiles it once), timed apart, so a sweep reports its start-up cost apart from its steady state.
Ray and Dask are optional extras, imported only when asked for.
"""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from .space import Point

EXECUTORS = ("local", "ray", "dask")
_WARMED: list[float] = []  # this process's warm-up seconds, once it has warmed


@dataclass(frozen=True)
class Batch:
    """What one batch gave back: its rows, and where and how long it ran."""

    rows: list[dict[str, Any]]
    pid: int
    warm_s: float  # the engine's warm-up in this batch (0 if the process was already warm)
    run_s: float


def run_batch(job: tuple[Callable[[Point], dict[str, Any]], list[Point]]) -> Batch:
    task, points = job
    warm_s = 0.0
    if not _WARMED:
        start = time.perf_counter()
        _warm()
        warm_s = time.perf_counter() - start
        _WARMED.append(warm_s)
    start = time.perf_counter()
    rows = [task(p) for p in points]
    return Batch(rows, os.getpid(), warm_s, time.perf_counter() - start)


def _warm() -> None:
    """Simulate a one-core matmul: the engine's jitted code is loaded (or compiled) before any point."""
    from ..config import load_machine  # noqa: PLC0415
    from ..pipeline import parse, run  # noqa: PLC0415
    from ..validation.workloads import matmul_program  # noqa: PLC0415 -- the worker's first import of the simulator
    machine = load_machine()
    run(parse(matmul_program(1, 64, 64, 64, (1, 1, 1, 1)), machine, "warm-up"), machine, cache=False)


def run_batches(executor: str, jobs: Sequence[tuple], workers: int, address: str | None) -> Iterator[tuple[int, Batch]]:
    """(index, batch) for every job, as they finish."""
    if executor not in EXECUTORS:
        raise ConfigError(f"unknown executor {executor!r}; expected one of {', '.join(EXECUTORS)}", None, "--executor")
    if executor == "ray":
        yield from _ray(jobs, workers, address)
    elif executor == "dask":
        yield from _dask(jobs, workers, address)
    else:
        yield from _local(jobs, workers)


def _local(jobs: Sequence[tuple], workers: int) -> Iterator[tuple[int, Batch]]:
    from concurrent.futures import as_completed  # noqa: PLC0415

    from ..pool import submit  # noqa: PLC0415
    if workers < 2 or len(jobs) < 2:
        yield from ((i, run_batch(job)) for i, job in enumerate(jobs))
        return
    futures = {f: i for i, f in enumerate(submit(run_batch, jobs, workers))}
    for future in as_completed(futures):
        yield futures[future], future.result()


def _dask(jobs: Sequence[tuple], workers: int, address: str | None) -> Iterator[tuple[int, Batch]]:
    import logging  # noqa: PLC0415

    from ..pool import main_hidden  # noqa: PLC0415
    distributed = _optional("distributed", "dask")
    cluster = None
    if not address:
        with main_hidden():  # the workers start now, and must not run the user's script again
            cluster = distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                               dashboard_address=None, silence_logs=logging.ERROR)
    client = distributed.Client(address or cluster)
    try:
        futures = client.map(run_batch, list(jobs), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        for future in distributed.as_completed(futures):
            yield index[future.key], future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _ray(jobs: Sequence[tuple], workers: int, address: str | None) -> Iterator[tuple[int, Batch]]:
    ray = _optional("ray", "ray")
    started = not ray.is_initialized()
    if started:
        ray.init(address=address, **({} if address else {"num_cpus": workers}), include_dashboard=False,
                 log_to_driver=False, configure_logging=False)
    try:
        remote = ray.remote(num_cpus=1)(run_batch)
        refs = [remote.remote(job) for job in jobs]
        index = {ref: i for i, ref in enumerate(refs)}
        waiting = list(refs)
        while waiting:
            done, waiting = ray.wait(waiting, num_returns=1)
            yield index[done[0]], ray.get(done[0])
    finally:
        if started:
            ray.shutdown()


def _optional(module: str, extra: str) -> Any:
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"the {extra} executor needs the {extra} extra: pip install 'spyre-emu[{extra}]'",
                          None, "--executor") from None
