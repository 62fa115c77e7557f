"""Corelet FIFOs and the units that stream through them, one stick per step.

Each corelet has an input FIFO (``lx2fifoN`` -> ``sfuN``) and an output FIFO (``sfuN`` ->
``fifo2lxN``) of ``[fifo] depth_sticks``, counting sticks pushed but not yet visible. A
step needs a visible stick in its source FIFO and a free slot in its destination FIFO;
a blocked unit is woken, as a STEP event in its canonical place, by the visibility or the
pop it waits for. A pushed stick becomes visible ``visible`` cycles after its step (a VISIBLE
event); the unit steps again ``step`` cycles later and its instruction ends ``visible``
cycles after its last step.
"""

from __future__ import annotations

from collections.abc import Generator

import simpy

from .order import At, Kind, Wake


class Fifo:
    def __init__(self, env: simpy.Environment, index: int, depth: int):
        self.env, self.index, self.depth = env, index, depth
        self.occupancy = 0   # pushed and not yet popped
        self.visible = 0     # of those, the ones a consumer may pop
        self.data_wanted: tuple[Wake, int] | None = None
        self.room_wanted: tuple[Wake, int] | None = None

    def push(self, visible_after: int) -> None:
        self.occupancy += 1
        At(self.env, self.env.now + visible_after, Kind.VISIBLE, self.index).callbacks.append(self._show)

    def pop(self) -> None:
        self.visible -= 1
        self.occupancy -= 1
        self.room_wanted = _wake(self.env, self.room_wanted)

    def wait_data(self, unit: int) -> Wake:
        wake = Wake(self.env)
        self.data_wanted = (wake, unit)
        return wake

    def wait_room(self, unit: int) -> Wake:
        wake = Wake(self.env)
        self.room_wanted = (wake, unit)
        return wake

    def _show(self, _: simpy.Event) -> None:
        self.visible += 1
        self.data_wanted = _wake(self.env, self.data_wanted)


def _wake(env: simpy.Environment, wanted: tuple[Wake, int] | None) -> None:
    if wanted is not None:
        wake, unit = wanted
        wake.fire(env.now, Kind.STEP, unit)


def stream(env: simpy.Environment, unit: int, sticks: int, src: Fifo | None, dst: Fifo | None,
           step: int, visible: int) -> Generator:
    """Move ``sticks`` sticks from ``src`` (None: LX) to ``dst`` (None: LX); ends with END."""
    last = env.now
    for n in range(sticks):
        yield At(env, last + step if n else last, Kind.STEP, unit)
        while src is not None and src.visible == 0:
            yield src.wait_data(unit)
        while dst is not None and dst.occupancy >= dst.depth:
            yield dst.wait_room(unit)
        if src is not None:
            src.pop()
        if dst is not None:
            dst.push(visible)
        last = env.now
    yield At(env, last + visible, Kind.END, unit)
