"""The one emulated card of this process: its memory, its log of work, its streams and generator.

``register_device`` (``__init__.py``) makes it; the dispatcher (dispatch.py), the ``torch.spyre``
module functions (module.py) and the compile backend's hooks reach it through ``current()``.
"""

from __future__ import annotations

from typing import Any

import torch

from spyre_emu.config import STICK_BYTES, Machine
from spyre_emu.host import Host

from ..report import FrontendReport
from .copies import copy_cycles
from .eager import Eager
from .log import Log
from .memory import CardMemory
from .tensors import Store


class Device:
    def __init__(self, name: str, machine: Machine, host: Host):
        self.name, self.machine = name, machine
        self.torch_device = torch.device(name, 0)
        self.store = Store(CardMemory(machine.dram.size_bytes), self.torch_device)
        self.log = Log(machine, host)
        self.eager = Eager(machine)
        self.generator = torch.Generator()
        self.stream = 0          # the current stream's id
        self.streams = 1         # ids handed out so far (0: the default stream)
        self.card_copies: dict[int, int] = {}   # sticks -> simulated cycles of a copy within the card

    def compute(self, op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any],
                operand_bytes: list[int]) -> Any:
        """One op on host views: on the simulated card when it has kernels, else on the CPU (its
        device operands, ``operand_bytes``, cross PCIe to the host and its results back)."""
        result, ran = self.eager.run(op, args, kwargs)
        if ran.report is not None:
            self.log.launch(ran.name, ran.report.latency_us, self.stream, ran.report, ran.program)
        for reason in ran.fallbacks:
            self.log.fallback(str(op), reason)
        if ran.report is None:
            for nbytes in operand_bytes:
                self.log.copy("d2h", nbytes, self.stream, f"{op} operand to the CPU")
            for nbytes in _nbytes(result):
                self.log.copy("h2d", nbytes, self.stream, f"{op} result to the card")
        return result

    def copy(self, direction: str, nbytes: int) -> None:
        self.log.copy(direction, nbytes, self.stream, "copy")

    # The front end's Residence (runtime.py): compiled graphs on device tensors.
    def holds(self, t: Any) -> bool:
        return isinstance(t, torch.Tensor) and t.device.type == self.name

    def host_view(self, t: torch.Tensor) -> torch.Tensor:
        return self.store.host_view(t)

    def to_device(self, t: torch.Tensor) -> torch.Tensor:
        return self.store.place(t)

    def ran(self, rep: FrontendReport) -> None:
        self.log.launch("compiled graph", rep.latency_us, self.stream, rep)
        for f in rep.fallbacks:
            self.log.fallback(f["op"], f["reason"])

    def copy_on_card(self, nbytes: int) -> None:
        """A copy within the card: the simulator's identity kernel program over its sticks (copies.py),
        simulated once per size."""
        sticks = max(1, -(-nbytes // STICK_BYTES))
        if sticks not in self.card_copies:
            self.card_copies[sticks] = copy_cycles(nbytes, self.machine)
        us = self.card_copies[sticks] / self.machine.clock.ghz / 1000
        self.log.launch("copy on card", us, self.stream, program=f"copy of {sticks} sticks")

    def synchronize(self) -> None:
        """The host waits for every stream: later work starts after everything so far."""
        self.log.synchronize()


def _nbytes(result: Any) -> list[int]:
    items = result if isinstance(result, tuple | list) else [result]
    return [t.numel() * t.element_size() for t in items if isinstance(t, torch.Tensor)]


_DEVICE: list[Device] = []


def current() -> Device:
    return _DEVICE[0]


def install(device: Device) -> None:
    _DEVICE[:] = [device]


def installed() -> bool:
    return bool(_DEVICE)
