"""LX ports: each DMA unit's own port, and each core's ring receive port.

A port moves one stick per interval, first come, first served: a stick asking at cycle t
goes at the later of t and the port's next free time. Intervals are kept in 1/FP_ONE of a
cycle, so the PCIe unit's port can move a stick every ~2.34 cycles without drifting; a
stick goes at the first whole cycle of its slot.
"""

from __future__ import annotations

FP_ONE = 1024  # fixed-point cycles: one cycle is FP_ONE


class Port:
    def __init__(self, interval_fp: int = FP_ONE):
        self.interval_fp = interval_fp
        self.free_fp = 0

    def take(self, cycle: int) -> int:
        """Reserve the next slot at or after ``cycle``; the cycle the stick moves."""
        slot = max(self.free_fp, cycle * FP_ONE)
        self.free_fp = slot + self.interval_fp
        return -(-slot // FP_ONE)
