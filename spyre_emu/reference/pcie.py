"""PCIe: the host link's port rate, in 1/FP_ONE of a cycle per stick (docs/config.md [pcie]).

Each stick travels in TLPs of ``max_payload_bytes`` plus ``tlp_overhead_bytes``, at
``gbytes_per_s``; at the core clock a stick takes a fractional number of cycles, so the
interval is kept in fixed point, rounded once, as the card's timing contract says.
"""

from __future__ import annotations

from ..config import STICK_BYTES, Machine
from .lx import FP_ONE


def interval_fp(machine: Machine) -> int:
    p = machine.pcie
    wire_bytes = STICK_BYTES * (p.max_payload_bytes + p.tlp_overhead_bytes) / p.max_payload_bytes
    bytes_per_cycle = p.gbytes_per_s / machine.clock.ghz
    return round(wire_bytes / bytes_per_cycle * FP_ONE)
