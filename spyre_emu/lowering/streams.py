"""CoreStreams: one core's unit streams under construction, as unit program JSON items."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..config import STICK_BYTES
from .placement import Runs

Item = dict[str, Any]


@dataclass
class CoreStreams:
    core: int
    tag: str  # prefix of this core's tokens in the current kernel (token names are card-wide)
    units: dict[str, list[Item]] = field(default_factory=dict)

    def add(self, unit: str, item: Item) -> Item:
        self.units.setdefault(unit, []).append(item)
        return item

    def dma(self, unit: str, tensor: str, piece: Runs, lx: int) -> list[Item]:
        """Move a chunk's runs of device sticks between DRAM buffer ``tensor`` and LX at ``lx``."""
        items, pos = [], 0
        for start, n in piece:
            items.append(self.add(unit, {"op": unit, "dram": f"{tensor}+{start * STICK_BYTES}",
                                         "lx": lx + pos * STICK_BYTES, "bytes": n * STICK_BYTES}))
            pos += n
        return items


Emit = Callable[[CoreStreams], None]  # appends one core's share of a kernel to its streams
