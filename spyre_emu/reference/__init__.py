"""The reference model: the card's unit-level timing as plain simpy processes.

It is the twin of the numba engine, written independently from the documented timing
contract (docs/unit-program.md, docs/decisions/), sharing only the config and the unit
program loaders: ``simulate(program, machine)`` gives every instruction's start and end
cycle, which must equal ``spyre_emu.engine.simulate``'s exactly (tests/reference/).

One process per unit runs its stream (units.py); tokens are counting semaphores
(tokens.py); FIFOs count occupancy and visibility (fifo.py); each DMA transfer spawns a
process per DRAM request and per stick (dma.py); ring links are simpy Resources
(ring.py); each DRAM channel is a process with its banks (dram.py).

Same-cycle order. Both models handle the events of one cycle in the canonical order of
docs/decisions/event-order.md: by kind (start, end, read request, stick at a stop, FIFO
step, FIFO visibility, write done, channel pick), then by payload (unit; stop, destination,
unit, role; FIFO; channel), then in scheduling order. simpy orders its queue by (time,
priority, insertion counter); every event of the model's own (order.At, order.Wake) gets
the packed (kind, payload) as its priority, so simpy's heap is that order. simpy's
internal events (process start, resource grants, ``succeed``) sort before them within the
cycle and only carry out what the event being handled caused (order.py).
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from ..config import Machine
from ..unit_program import UnitProgram
from .card import build_card
from .units import Times, unit_process


@dataclass(frozen=True)
class ReferenceLog:
    """Per instruction, in ``program.instructions()`` order: start and end cycles."""

    start: list[int]
    end: list[int]
    total_cycles: int


def simulate(program: UnitProgram, machine: Machine) -> ReferenceLog:
    """Run ``program``; raise RuntimeError naming the stuck instructions on a deadlock."""
    env = simpy.Environment()
    card = build_card(env, machine)
    count = len(program.instructions())
    times = Times([-1] * count, [-1] * count)
    index = 0
    for (core, unit), stream in program.streams.items():
        numbered = list(enumerate(stream, index))
        env.process(unit_process(card, core, unit, numbered, times))
        index += len(stream)
    env.run()
    stuck = [ins.path for ins, end in zip(program.instructions(), times.end, strict=True) if end < 0]
    if stuck:
        raise RuntimeError(f"deadlock at cycle {env.now}: {', '.join(stuck[:4])}")
    return ReferenceLog(times.start, times.end, max(times.end, default=0))


__all__ = ["ReferenceLog", "simulate"]
