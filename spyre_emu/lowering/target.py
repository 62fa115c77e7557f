"""Target: what every op family's planner plans a kernel against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from ..config import STICK_BYTES, Machine
from ..errors import LxOverflowError, ProgramError
from ..kernel_program import KernelProgram, Tensor
from ..kernel_program.model import Kernel
from .lx import Resident
from .streams import Emit


@dataclass(frozen=True)
class Target:
    program: KernelProgram
    machine: Machine
    budget: int                     # LX sticks from offset 0 free for the kernel's chunk buffers
    residents: dict[str, Resident]  # the tensors kept in LX, where they live

    def stepper(self, kernel: Kernel, most: int | None = None) -> Stepper:
        return partial(step_size, kernel, self.program.source, most=most)

    def streaming_stepper(self, kernel: Kernel, tensors: list[Tensor]) -> Stepper:
        """Steps of sticks streamed DRAM -> SFU -> DRAM: when the kernel reads and writes DRAM and does not
        ask for a count, at most what a DMA unit keeps in flight. A larger step gains the DMA no rate, only
        a longer fill and drain, and with two LX-sized steps a core loads everything before it stores
        anything, where silicon overlaps a kernel's reads and writes (docs/decisions/dram.md)."""
        reads = any(t.name not in self.residents for t in tensors[:-1])
        most = self.machine.dma.max_inflight_bytes // STICK_BYTES
        return self.stepper(kernel, most if reads and tensors[-1].name not in self.residents else None)


def step_size(kernel: Kernel, source: str, items: int, fits: int, most: int | None = None) -> int:
    """How many of a core's ``items`` one double-buffered step takes: as many as ``fit`` in LX (at most
    ``most``), or items / ``kernel.steps`` when the kernel asks for that many steps (a counted loop)."""
    if fits < 1:
        raise LxOverflowError("LX overflow: one step's buffers do not fit in the LX left to this kernel", source,
                              kernel.path)
    if kernel.steps is None:
        return fits if most is None else min(fits, most)
    if kernel.steps > items:  # more steps than items would silently run fewer steps than asked
        raise ProgramError(f"{kernel.steps} steps, but a core has only {items} items to step over", source,
                           kernel.path + ".steps")
    want = -(-items // kernel.steps)
    if want > fits:
        raise LxOverflowError(f"LX overflow: {kernel.steps} steps of {want} need more LX than the {fits} that fit "
                              "per step; ask for more steps", source, kernel.path + ".steps")
    return want


Stepper = Callable[[int, int], int]  # (a core's items, how many fit in LX) -> items per step


Planner = Callable[[Target, Kernel, list[Tensor]], dict[int, Emit]]  # each core's share of a kernel
