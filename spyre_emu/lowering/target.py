"""Target: what every op family's planner plans a kernel against."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..config import Machine
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


Planner = Callable[[Target, Kernel, list[Tensor]], dict[int, Emit]]  # each core's share of a kernel
