"""The card as the reference sees it: tokens, the ring, DRAM channels, FIFOs and DMA units.

Units are numbered as the canonical order numbers them (docs/decisions/event-order.md):
core by core, each core's units in ``CORE_UNITS`` order, the host's PCIe unit last; FIFOs
two per corelet, in corelet order (core * 2 + corelet), the input FIFO first.
"""

from __future__ import annotations

from dataclasses import dataclass

import simpy

from ..config import Machine
from ..unit_program import HOST_CORE
from ..unit_program.opcodes import CORE_UNITS, HOST_UNIT
from . import pcie
from .dma import DmaUnit, Fabric
from .dram import Channel
from .fifo import Fifo
from .lx import Port
from .ring import Ring
from .tokens import Tokens

DMA_UNITS = ("load", "store", "send", HOST_UNIT)


def unit_number(machine: Machine, core: int, unit: str) -> int:
    if core == HOST_CORE:
        return machine.cores.count * len(CORE_UNITS)
    return core * len(CORE_UNITS) + CORE_UNITS.index(unit)


@dataclass(frozen=True)
class Card:
    env: simpy.Environment
    machine: Machine
    tokens: Tokens
    fabric: Fabric
    fifos: list[Fifo]   # 2 per corelet: 4 * core + 2 * corelet + (0 input, 1 output)

    def fifo(self, core: int, unit: str, output: bool) -> Fifo:
        corelet = int(unit[-1])
        return self.fifos[4 * core + 2 * corelet + int(output)]

    def dma_unit(self, core: int, unit: str) -> DmaUnit:
        number = unit_number(self.machine, core, unit)
        if core == HOST_CORE:
            port = Port(pcie.interval_fp(self.machine))
            return DmaUnit(self.fabric, number, self.machine.stop_of(HOST_UNIT), port,
                           self.machine.pcie.latency_cycles)
        return DmaUnit(self.fabric, number, self.fabric.core_stops[core], Port())


def build_card(env: simpy.Environment, machine: Machine) -> Card:
    d = machine.dram
    per_controller = d.channels // d.controllers
    fabric = Fabric(
        env=env, machine=machine, ring=Ring(env, machine),
        channels=[Channel(env, machine, c) for c in range(d.channels)],
        channel_stops=[machine.stop_of(f"mc{c // per_controller}") for c in range(d.channels)],
        core_stops=[machine.stop_of(f"core{c}") for c in range(machine.cores.count)],
        rx_ports=[Port() for _ in range(machine.cores.count)])
    fifos = [Fifo(env, f, machine.fifo.depth_sticks) for f in range(4 * machine.cores.count)]
    return Card(env, machine, Tokens(env), fabric, fifos)
