"""Units: each runs its instruction stream in order, as one simpy process.

An instruction starts when the previous one on its unit has ended (on a DMA unit: has issued its
last request) and every token it waits on is there; it ends at its END event and then signals its
tokens, and the unit at once tries its next instruction (within the same event, so before the units it woke).
All units first try at cycle 0. PT passes and SFU ops on LX operands last a fixed number
of cycles; FIFO ops stream (fifo.py); DMA ops move sticks (dma.py).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from functools import partial

from ..config import STICK_BYTES
from ..unit_program import Instruction
from ..unit_program.model import matmul_repeat
from ..unit_program.opcodes import unit_kind
from . import pt, sfu
from .card import DMA_UNITS, Card, unit_number
from .fifo import stream
from .order import At, Kind


@dataclass
class Times:
    """Start and end cycle of every instruction, by its index in the program."""

    start: list[int]
    end: list[int]


def unit_process(card: Card, core: int, unit: str, instructions: list[tuple[int, Instruction]],
                 times: Times) -> Generator:
    env, tokens = card.env, card.tokens
    number = unit_number(card.machine, core, unit)
    dma = card.dma_unit(core, unit) if unit_kind(unit) in DMA_UNITS else None
    yield At(env, 0, Kind.START, number)
    for index, ins in instructions:
        while not tokens.take(ins.wait):
            yield tokens.wait(ins.wait, number)
        times.start[index] = env.now
        if dma is not None:  # returns once issued; the transfer ends later, in order
            yield from dma.run(ins, index, partial(_ended, times, tokens, index, ins))
            continue
        yield from _compute(card, number, ins)
        _ended(times, tokens, index, ins, env.now)


def _ended(times: Times, tokens, index: int, ins: Instruction, cycle: int) -> None:
    times.end[index] = cycle
    for name in ins.signal:
        tokens.signal(name)


def _compute(card: Card, number: int, ins: Instruction) -> Generator:
    """A PT, SFU or FIFO-mover instruction; returns at its END event."""
    env, machine, a = card.env, card.machine, ins.args
    kind = unit_kind(ins.unit)
    if kind == "pt":
        cycles = matmul_repeat(a) * pt.pass_cycles(machine, a["rows"], a.get("cols", machine.pt.cols_per_pass),
                                                   a["k"], a.get("dtype", "fp16"))
        yield At(env, env.now + cycles, Kind.END, number)
    elif kind == "lx2fifo":
        yield from stream(env, number, a["bytes"] // STICK_BYTES, None, card.fifo(ins.core, ins.unit, False), 1, 1)
    elif kind == "fifo2lx":
        yield from stream(env, number, a["bytes"] // STICK_BYTES, card.fifo(ins.core, ins.unit, True), None, 1, 1)
    elif a["a"] == "fifo" or a["out"] == "fifo":
        cost = sfu.stick_cycles(machine, ins.op)
        src = card.fifo(ins.core, ins.unit, False) if a["a"] == "fifo" else None
        dst = card.fifo(ins.core, ins.unit, True) if a["out"] == "fifo" else None
        yield from stream(env, number, a["sticks"], src, dst, cost, cost + machine.sfu.latency_cycles)
    else:
        yield At(env, env.now + sfu.lx_op_cycles(machine, ins.op, a["sticks"]), Kind.END, number)
