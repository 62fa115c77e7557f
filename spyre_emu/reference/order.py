"""Same-cycle order: the canonical (cycle, kind, payload) order as simpy event priorities.

simpy's queue is a heap keyed by (time, priority, insertion counter). The card's rule
(docs/decisions/event-order.md) is (cycle, kind, payload), then the push sequence between
identical events. So an event the rule governs is scheduled with one integer priority that
packs its kind and payload, most significant field first: integer comparison is then the
lexicographic order of (kind, payload), and simpy's insertion counter is the push sequence.

simpy's own events (process starts, resource grants, ``succeed()``, ``timeout()``) carry its
priorities URGENT (0) and NORMAL (1), below every packed priority. In this model they are
only ever scheduled for the current cycle as a consequence of the event being handled, or
(the ring's one-cycle link hold) where their place in the cycle cannot matter, so they run
as part of the event that caused them, before the next canonical event: the same as the
numba engine, which does that work inside the event's handler.
"""

from __future__ import annotations

from enum import IntEnum

import simpy


class Kind(IntEnum):
    """What an event is; same-cycle events go in this order, then by their payload."""

    START = 0     # a unit tries to start its next instruction (payload: unit)
    END = 1       # an instruction ends (unit)
    REQUEST = 2   # a read request reaches its memory controller (unit, request number)
    STICK = 3     # a stick reaches a ring stop (stop, destination stop, unit, role, detail)
    STEP = 4      # a FIFO-streaming unit tries its next stick (unit)
    VISIBLE = 5   # a stick pushed into a FIFO becomes visible (FIFO)
    WRITTEN = 6   # a write request's data is in DRAM (unit, sticks)
    PICK = 7      # a DRAM channel picks its next request (channel)
    ISSUE = 8     # a DMA unit's piece is set up: it issues again (unit)


_FIELD_BITS = 40  # each payload field is below 2**40 (units, stops, request numbers)
_FIELDS = 5       # payload fields; shorter payloads are padded with zeros
_FIRST = 2        # above simpy's URGENT and NORMAL


def priority(kind: Kind, *payload: int) -> int:
    key = int(kind)
    for i in range(_FIELDS):
        key = key << _FIELD_BITS | (payload[i] if i < len(payload) else 0)
    return _FIRST + key


class At(simpy.Event):
    """An event at ``cycle`` in the canonical place given by ``kind`` and ``payload``."""

    def __init__(self, env: simpy.Environment, cycle: int, kind: Kind, *payload: int):
        super().__init__(env)
        self._ok, self._value = True, None
        env.schedule(self, priority(kind, *payload), cycle - env.now)


class Wake(simpy.Event):
    """An event a process waits on until another fires it, in its canonical place."""

    def fire(self, cycle: int, kind: Kind, *payload: int) -> None:
        """Schedule it (once: later calls do nothing, so several causes may fire it)."""
        if self.triggered:
            return
        self._ok, self._value = True, None
        self.env.schedule(self, priority(kind, *payload), cycle - self.env.now)
