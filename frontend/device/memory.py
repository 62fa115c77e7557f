"""The card's memory as the device sees it: an address range of ``[dram] size_bytes`` handed out in
128 B aligned blocks (a stick, the card's unit of DMA), first fit, with the statistics torch's
``memory_allocated`` family reports. Addresses are the card's; nothing here holds data."""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from spyre_emu.config import STICK_BYTES
from spyre_emu.errors import SpyreEmuError

ALIGN = STICK_BYTES  # 128 B


class OutOfMemoryError(SpyreEmuError, RuntimeError):
    """An allocation the card's free memory cannot hold (a RuntimeError, as torch's OOM errors are)."""


@dataclass
class Stats:
    allocated: int = 0
    peak: int = 0
    allocations: int = 0
    frees: int = 0


class CardMemory:
    """First-fit allocator over ``[0, capacity)``: ``blocks`` maps each free block's start to its size."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.free_starts: list[int] = [0] if capacity else []
        self.free_sizes: dict[int, int] = {0: capacity} if capacity else {}
        self.used: dict[int, int] = {}
        self.stats = Stats()

    def allocate(self, nbytes: int) -> int:
        size = -(-max(nbytes, 1) // ALIGN) * ALIGN
        start = next((s for s in self.free_starts if self.free_sizes[s] >= size), None)
        if start is None:
            largest = max(self.free_sizes.values(), default=0)
            raise OutOfMemoryError(
                f"out of memory on the simulated card: {nbytes} B requested, {self.capacity - self.stats.allocated} B "
                f"free of {self.capacity} B (largest free block {largest} B); the capacity is [dram] size_bytes")
        rest = self.free_sizes.pop(start) - size
        self.free_starts.remove(start)
        if rest:
            self._add_free(start + size, rest)
        self.used[start] = size
        self.stats.allocated += size
        self.stats.peak = max(self.stats.peak, self.stats.allocated)
        self.stats.allocations += 1
        return start

    def free(self, start: int) -> None:
        size = self.used.pop(start)
        self.stats.allocated -= size
        self.stats.frees += 1
        self._add_free(start, size)
        self._merge(start)

    def _add_free(self, start: int, size: int) -> None:
        bisect.insort(self.free_starts, start)
        self.free_sizes[start] = size

    def _merge(self, start: int) -> None:
        """Join the block at ``start`` with its free neighbours."""
        at = self.free_starts.index(start)
        if at + 1 < len(self.free_starts) and start + self.free_sizes[start] == self.free_starts[at + 1]:
            nxt = self.free_starts.pop(at + 1)
            self.free_sizes[start] += self.free_sizes.pop(nxt)
        if at > 0:
            prev = self.free_starts[at - 1]
            if prev + self.free_sizes[prev] == start:
                self.free_sizes[prev] += self.free_sizes.pop(start)
                self.free_starts.pop(at)
