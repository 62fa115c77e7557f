"""Tokens: counting semaphores with card-wide names, shared by every core and the host.

Every token starts at 0; an instruction ending adds one to each token it signals; an
instruction starts only when each token it waits on is at least 1, and then takes one
from each. A unit blocked on tokens is woken, as a START event in its canonical place,
whenever one of the tokens it lacks is signalled, and then checks again.
"""

from __future__ import annotations

from collections import defaultdict

import simpy

from .order import Kind, Wake


class Tokens:
    def __init__(self, env: simpy.Environment):
        self.env = env
        self.count: defaultdict[str, int] = defaultdict(int)
        self.waiting: defaultdict[str, list[tuple[Wake, int]]] = defaultdict(list)

    def take(self, names: tuple[str, ...]) -> bool:
        """Take one of each token if all are there; otherwise take nothing."""
        if any(self.count[name] < 1 for name in names):
            return False
        for name in names:
            self.count[name] -= 1
        return True

    def wait(self, names: tuple[str, ...], unit: int) -> Wake:
        """An event fired when any of the missing tokens is next signalled."""
        wake = Wake(self.env)
        for name in names:
            if self.count[name] < 1:
                self.waiting[name].append((wake, unit))
        return wake

    def signal(self, name: str) -> None:
        self.count[name] += 1
        for wake, unit in self.waiting.pop(name, []):
            wake.fire(self.env.now, Kind.START, unit)
