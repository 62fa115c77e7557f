"""The bidirectional ring: shortest routes, and links that carry one stick per cycle each.

Stops are numbered in ``[ring] stops`` order, clockwise. A stick goes the shorter way
round (ties clockwise) and keeps its direction. Each link (a stop's way out, per
direction) is a simpy Resource of capacity one, held for one cycle per stick (a send stick:
``send_stick_cycles``): a stick that
reaches a stop queues for the link first come, first served, leaves when it gets it and
reaches the next stop ``hop_latency_cycles`` after leaving. Sticks reaching a stop in the
same cycle queue in the canonical order (stop, destination, unit, role, detail). The hold
ends with a plain simpy timeout, early in the next cycle; where that falls among the
cycle's events cannot matter: a stick arriving then leaves at once unless an earlier one
queues, whether it finds the link released or gets it on release.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from enum import IntEnum

import simpy

from ..config import Machine
from .order import At, Kind


class Role(IntEnum):
    """What a stick is doing on the ring; part of its place in the canonical order."""

    READ = 0    # DRAM data on its way to a load (or d2h)
    WRITE = 1   # data on its way to a memory controller (store, h2d)
    SEND = 2    # data on its way to another core's LX
    MCAST = 3   # a copy of multicast DRAM data, written at each destination it passes


class Ring:
    def __init__(self, env: simpy.Environment, machine: Machine):
        self.env = env
        self.stops = len(machine.ring.stops)
        self.hop_cycles = machine.ring.hop_latency_cycles
        self.send_hold = machine.ring.send_stick_cycles
        self.links = [[simpy.Resource(env, 1) for _ in range(2)] for _ in range(self.stops)]

    def hops(self, src: int, dst: int) -> int:
        clockwise = (dst - src) % self.stops
        return min(clockwise, self.stops - clockwise)

    def direction(self, src: int, dst: int) -> int:
        """0 clockwise (towards higher stop numbers), 1 counter-clockwise."""
        clockwise = (dst - src) % self.stops
        return 0 if clockwise <= self.stops - clockwise else 1

    def _release(self, link: simpy.Resource, held: simpy.Event, cycles: int) -> Generator:
        """The link is free again ``cycles`` after the stick took it; the stick itself has gone on."""
        yield self.env.timeout(cycles)
        link.release(held)

    def carry(self, cycle: int, src: int, dst: int, unit: int, role: Role, detail: int,
              at_stop: Callable[[int], None] | None = None) -> Generator:
        """A stick put on the ring at ``src`` at ``cycle``; returns as it reaches ``dst``.
        ``at_stop(stop)`` runs as it reaches each stop, before it asks for the next link."""
        direction = self.direction(src, dst)
        step = 1 if direction == 0 else -1
        stop = src
        yield At(self.env, cycle, Kind.STICK, stop, dst, unit, role, detail)
        while stop != dst:
            if at_stop:
                at_stop(stop)
            link = self.links[stop][direction]
            held = link.request()
            yield held
            leave = self.env.now
            self.env.process(self._release(link, held, self.send_hold if role == Role.SEND else 1))
            stop = (stop + step) % self.stops
            yield At(self.env, leave + self.hop_cycles, Kind.STICK, stop, dst, unit, role, detail)
        if at_stop:
            at_stop(stop)
