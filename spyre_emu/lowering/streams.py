"""CoreStreams: one core's unit streams under construction, as unit program JSON items, and how
every family cuts a core's share into double-buffered chunks split between the two corelets."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from types import MappingProxyType
from typing import Any

from ..config import STICK_BYTES
from .placement import Runs

Item = dict[str, Any]


@dataclass
class CoreStreams:
    core: int
    tag: str = ""  # prefix of this core's tokens in the current kernel (token names are card-wide)
    units: dict[str, list[Item]] = field(default_factory=dict)
    readers: dict[int, list[Item]] = field(default_factory=dict)  # chunk -> last users of its buffer set

    def start_kernel(self, tag: str) -> None:
        self.tag, self.readers = tag, {}

    def add(self, unit: str, item: Item) -> Item:
        self.units.setdefault(unit, []).append(item)
        return item

    def wire_chunk(self, q: int, loads: list[Item], work: dict[str, list[Item]], stores: list[Item]) -> None:
        """Append chunk ``q``'s work and chain its tokens: its loads feed each unit's work, which
        feeds its stores. Chunk q uses buffer set q % 2, so its first writers (the loads, or the
        work when every input is in LX) wait until chunk q - 2's last readers (the stores, or the
        work when the output is in LX) are done."""
        tag, users = f"{self.tag}q{q}.", sorted(work)
        if loads:
            loads[-1].setdefault("signal", []).extend(f"{tag}in>{u}" for u in users)
        for u in users:
            ops = work[u]
            if loads:
                ops[0].setdefault("wait", []).append(f"{tag}in>{u}")
            if stores:
                ops[-1].setdefault("signal", []).append(f"{tag}out<{u}")
            for op in ops:
                self.add(u, op)
        if stores:
            stores[0].setdefault("wait", []).extend(f"{tag}out<{u}" for u in users)
        writers = loads[:1] or [work[u][0] for u in users]
        for i, reader in enumerate(self.readers.pop(q - 2, [])):
            for j, writer in enumerate(writers):
                reader.setdefault("signal", []).append(f"{tag}free{i}>{j}")
                writer.setdefault("wait", []).append(f"{tag}free{i}>{j}")
        self.readers[q] = stores[-1:] or [work[u][-1] for u in users]

    def dma(self, unit: str, tensor: str, piece: Runs, lx: int) -> list[Item]:
        """Move a chunk's runs of device sticks between DRAM buffer ``tensor`` and LX at ``lx``: one
        instruction per pattern of equal runs at a constant stride (a strided descriptor)."""
        items, pos = [], 0
        for start, n, count, stride in patterns(piece):
            items.append(self.add(unit, dma_item(unit, tensor, start, n, lx + pos * STICK_BYTES, count, stride)))
            pos += count * n
        return items


def dma_item(unit: str, tensor: str, start: int, n: int, lx: int, count: int = 1, stride: int = 0) -> Item:
    """A DMA between LX at ``lx`` and ``count`` runs of ``n`` device sticks of DRAM buffer ``tensor``, from
    stick ``start`` on, ``stride`` sticks apart (a strided descriptor when ``count`` > 1)."""
    item = {"op": unit, "dram": f"{tensor}+{start * STICK_BYTES}", "lx": lx, "bytes": count * n * STICK_BYTES}
    if count > 1:
        item.update(piece=n * STICK_BYTES, stride=stride * STICK_BYTES)
    return item


def patterns(runs: Runs) -> list[tuple[int, int, int, int]]:
    """Runs as (first stick, sticks per run, runs, stride): each the longest stretch of runs of one
    length whose starts step by one stride (greater than the length: runs never touch). A run that
    starts where a lone run ends joins it: a DRAM range going to one LX range is one piece, however it
    was cut. The pattern being grown is kept in locals (a tile's store can be thousands of one-stick runs)."""
    out: list[tuple[int, int, int, int]] = []
    if not runs:
        return out
    (first, size), count, stride = runs[0], 1, 0
    last = first
    for start, n in runs[1:]:
        if count == 1 and start == first + size:
            size += n
            continue
        step = start - last
        if n == size and (step == stride if count > 1 else step > n):
            count, stride, last = count + 1, step, start
            continue
        out.append((first, size, count, stride))
        first = last = start
        size, count, stride = n, 1, 0
    out.append((first, size, count, stride))
    return out


def chunks(runs: Runs, size: int) -> list[Runs]:
    """Cut a core's runs into chunks of at most ``size`` sticks, keeping device order."""
    out: list[Runs] = [[]]
    room = size
    for first, count in runs:
        at, left = first, count
        while left:
            if room == 0:
                out.append([])
                room = size
            take = min(left, room)
            out[-1].append((at, take))
            at, left, room = at + take, left - take, room - take
    return out


@cache
def halves(n: int) -> Mapping[str, tuple[int, int]]:
    """The two corelets' SFUs each take half of a chunk's ``n`` sticks (the first the larger).
    Cached (a split-K reduction asks for the same few sizes 100,000s of times), hence read-only."""
    mid = -(-n // 2)
    return MappingProxyType({unit: span for unit, span in (("sfu0", (0, mid)), ("sfu1", (mid, n)))
                             if span[1] > span[0]})


Emit = Callable[[CoreStreams], None]  # appends one core's share of a kernel to its streams
