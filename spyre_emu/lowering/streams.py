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

    def wire_chunk(self, b: int, q: int, chunks: int, loads: list[Item], sfu_ops: dict[int, list[Item]],
                   stores: list[Item]) -> None:
        """Tokens of one double-buffered chunk in buffer set ``b``: its loads feed each corelet's
        SFU ops, which feed its stores; chunk q + 2 loads into the same set once q is stored."""
        tag, users = self.tag, sorted(sfu_ops)
        if q >= 2:
            loads[0].setdefault("wait", []).append(f"{tag}free{b}")
        loads[-1]["signal"] = [f"{tag}in{b}_sfu{k}" for k in users]
        for k in users:
            ops = sfu_ops[k]
            ops[0]["wait"], ops[-1]["signal"] = [f"{tag}in{b}_sfu{k}"], [f"{tag}out{b}_sfu{k}"]
            for op in ops:
                self.add(f"sfu{k}", op)
        stores[0]["wait"] = [f"{tag}out{b}_sfu{k}" for k in users]
        if q + 2 < chunks:
            stores[-1]["signal"] = [f"{tag}free{b}"]

    def dma(self, unit: str, tensor: str, piece: Runs, lx: int) -> list[Item]:
        """Move a chunk's runs of device sticks between DRAM buffer ``tensor`` and LX at ``lx``."""
        items, pos = [], 0
        for start, n in piece:
            items.append(self.add(unit, {"op": unit, "dram": f"{tensor}+{start * STICK_BYTES}",
                                         "lx": lx + pos * STICK_BYTES, "bytes": n * STICK_BYTES}))
            pos += n
        return items


Emit = Callable[[CoreStreams], None]  # appends one core's share of a kernel to its streams
