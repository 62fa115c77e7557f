"""SFU: what a stick costs, by the op's cost class in the unit program's SFU table.

A stick of 64 fp16 values needs ``64 // lanes_fp16`` passes (at least one) of its class's
``[sfu.cost_cycles]``. On LX operands an op is one fixed duration, latency plus every
stick; on FIFOs it streams (fifo.py), one stick per cost, each visible after cost plus
latency.
"""

from __future__ import annotations

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..unit_program.opcodes import SFU_OPS


def stick_cycles(machine: Machine, op: str) -> int:
    values_per_stick = STICK_BYTES // DTYPE_BYTES["fp16"]
    passes = max(1, values_per_stick // machine.sfu.lanes_fp16)
    return machine.sfu.cost_cycles[SFU_OPS[op].cost_class] * passes


def lx_op_cycles(machine: Machine, op: str, sticks: int) -> int:
    return machine.sfu.latency_cycles + sticks * stick_cycles(machine, op)
