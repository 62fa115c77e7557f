"""Progress on stderr during a long first compile (lowering every kernel program, then simulating
them), so a 4-15 s wait is not silent: a bar for the lowering and a status line for the simulation,
each drawn only on a terminal and only once it has taken longer than ``DELAY`` seconds. Tests and
scripts whose stderr is not a terminal get nothing."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, TypeVar

from tqdm import tqdm

DELAY = 1.0  # seconds: a quicker phase draws nothing
T = TypeVar("T")


def _terminal(stream: IO[str]) -> bool:
    return bool(getattr(stream, "isatty", lambda: False)())


def bar(items: list[T], what: str, stream: IO[str] | None = None) -> Iterable[T]:
    """``items`` as they are done, with a bar ``spyre_emu: <what> i/n`` once DELAY has passed."""
    stream = stream or sys.stderr
    if not _terminal(stream) or len(items) < 2:
        return items
    return tqdm(items, desc=f"spyre_emu: {what}", unit="program", file=stream, delay=DELAY, leave=False)


@contextmanager
def status(text: str, stream: IO[str] | None = None) -> Iterator[None]:
    """A one-line ``spyre_emu: <text>`` once the block has run DELAY seconds, erased when it ends."""
    stream = stream or sys.stderr
    if not _terminal(stream):
        yield
        return
    start, shown = time.perf_counter(), threading.Event()

    def show() -> None:
        stream.write(f"\rspyre_emu: {text} ...")
        stream.flush()
        shown.set()
    timer = threading.Timer(DELAY, show)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()  # a status being drawn right now is finished first
        if shown.is_set():
            stream.write(f"\rspyre_emu: {text}: {time.perf_counter() - start:.1f} s\n")
            stream.flush()
