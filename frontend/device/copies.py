"""A copy within the card as the simulator runs it: an ``identity`` kernel program over the copy's
sticks (each loaded into LX and stored back by the cores' DMA, split over as many cores as divide
the sticks evenly), lowered and simulated once per size."""

from __future__ import annotations

from typing import Any

from spyre_emu.config import DTYPE_BYTES, STICK_BYTES, Machine
from spyre_emu.kernel_program import parse_kernel_program
from spyre_emu.pipeline import lowered, timing

LANES = STICK_BYTES // DTYPE_BYTES["fp16"]   # the bytes are copied as fp16 sticks: the values do not matter


def copy_program(sticks: int, cores: int) -> dict[str, Any]:
    split = max(d for d in range(1, min(cores, sticks) + 1) if sticks % d == 0)
    tensor = {"shape": [sticks, LANES], "dtype": "fp16"}
    return {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {**tensor, "role": "input"}, "y": {**tensor, "role": "output"}},
            "kernels": [{"name": "copy", "op": "identity", "inputs": ["x"], "outputs": ["y"],
                         "dims": {"mb": sticks, "out": LANES}, "work_division": {"mb": split}}]}


def copy_cycles(nbytes: int, machine: Machine) -> int:
    """The simulated cycles of copying ``nbytes`` (whole sticks) from one place in DRAM to another."""
    sticks = max(1, -(-nbytes // STICK_BYTES))
    kernels = parse_kernel_program(copy_program(sticks, machine.cores.count), "<device copy>")
    _, report = timing(lowered(kernels, machine), machine)
    return report.total_cycles
