"""The kernel program after loading: tensors with device layouts, kernels in program order."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .layout import TensorLayout


@dataclass(frozen=True)
class Tensor:
    """A named tensor; ``data`` is an .npy file (relative to the program) for functional runs."""

    name: str
    layout: TensorLayout
    role: str    # "input", "output", "intermediate" or "constant"
    space: str   # "dram" or "lx"
    data: Path | None
    init: str    # "zeros" or "randn" when there is no data file
    dram_address: int | None = None  # placement: a fixed DRAM address (space "dram")
    lx_offset: int | None = None     # placement: a fixed LX offset on every core (space "lx")
    in_place_of: str | None = None   # placement: written over this LX tensor by the kernel that reads it last


@dataclass(frozen=True)
class Kernel:
    """One op over a named iteration space, split over cores: ``slices[d]`` pieces of dim ``d``.

    Dims are listed in the output's host dim order; cores take slices with the first dim
    varying fastest, as real SuperDSC does.
    """

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    dims: dict[str, int]
    slices: dict[str, int]
    path: str
    attrs: dict[str, float | bool] = field(default_factory=dict)  # op attributes, defaults filled in
    steps: int | None = None  # each core's share in this many double-buffered steps (None: as LX allows)
    uneven: bool = False      # slices may differ by one unit (numpy.array_split), else must be equal

    @property
    def cores(self) -> int:
        count = 1
        for n in self.slices.values():
            count *= n
        return count


@dataclass(frozen=True)
class KernelProgram:
    """``host_transfers``: the run includes copying inputs in and outputs out over PCIe."""

    source: str
    tensors: dict[str, Tensor]
    kernels: tuple[Kernel, ...]
    host_transfers: bool = False
