"""A progress bar for long simulations: instructions done, simulated cycles, events per second.

It draws only on a terminal and only once a run has lasted ``delay_s`` (a second by default), so
short runs, pipes and CI logs stay as they were. The engine calls it between slices of its jitted
loop (engine.simulate), at most about ten times a second.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

WIDTH = 24


class ProgressBar:
    """``bar(cycle, done, total, events)`` redraws one line on ``stream``; ``bar.close()`` erases it."""

    def __init__(self, stream: TextIO, delay_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.stream, self.delay_s, self.clock = stream, delay_s, clock
        self.started = clock()
        self.drawn = ""
        self.enabled = stream.isatty()

    def __call__(self, cycle: int, done: int, total: int, events: int) -> None:
        elapsed = self.clock() - self.started
        if not self.enabled or elapsed < self.delay_s:
            return
        self.drawn = line(cycle, done, total, events, elapsed)
        self.stream.write("\r" + self.drawn)
        self.stream.flush()

    def close(self) -> None:
        """Erase the bar: the report follows on a clean line."""
        if self.drawn:
            self.stream.write("\r" + " " * len(self.drawn) + "\r")
            self.stream.flush()


def line(cycle: int, done: int, total: int, events: int, elapsed: float) -> str:
    """``[#########...............]  38% 2,310/6,176 instructions | 1,204,512 cycles | 3.1 M events/s``"""
    share = done / total if total else 1.0
    filled = int(share * WIDTH)
    return (f"[{'#' * filled}{'.' * (WIDTH - filled)}] {100 * share:3.0f}% {done:,}/{total:,} instructions"
            f" | {cycle:,} cycles | {events / max(elapsed, 1e-9) / 1e6:.1f} M events/s")
