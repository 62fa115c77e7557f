"""What each instruction moved: DRAM bytes, sticks per ring link, LX bytes.

The engine counts sticks per ring link for the whole run only. Reports need them per kernel
and over time, so this module retraces every transfer's route from its addresses and the
ring's geometry, with the engine's rules: a stick at DRAM address ``a`` is served by channel
``(a // interleave_bytes) % channels`` at its controller's ring stop (engine/dma.py), and a
stick takes the shorter way round, ties clockwise (engine/ring.py). The per-link sums equal
the engine's counters exactly, which tests/results/test_report.py checks on every example.

LX bytes are a model of scratchpad traffic, not timed: every stick an instruction reads from
or writes to an LX (DMA, FIFO movers, PT operands A and B and its result C, SFU operands kept
in LX; a broadcast operand is read once).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..engine.log import EventLog
from ..unit_program import Instruction
from ..unit_program.model import dram_pieces, matmul_a_sticks
from ..unit_program.opcodes import HOST_UNIT, SFU_OPERANDS, SFU_OPS

READS_DRAM = {"load", "d2h"}
WRITES_DRAM = {"store", "h2d"}


@dataclass(frozen=True)
class Traffic:
    """Per instruction (log order): bytes read from and written to DRAM, bytes through LX; and the
    ring sticks as rows (instruction, link, sticks), link ``2 * stop + direction`` as in EventLog."""

    dram_read: np.ndarray
    dram_write: np.ndarray
    lx: np.ndarray
    link_ins: np.ndarray
    link: np.ndarray
    link_sticks: np.ndarray

    def ring_sticks(self, n: int) -> np.ndarray:
        """Stick-hops of each of ``n`` instructions."""
        return np.bincount(self.link_ins, self.link_sticks, minlength=n).astype(np.int64)

    def per_link(self, links: int) -> np.ndarray:
        return np.bincount(self.link, self.link_sticks, minlength=links).astype(np.int64)


def trace_traffic(log: EventLog, machine: Machine) -> Traffic:
    n = len(log.instructions)
    read, write, lx = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    rows: list[tuple[int, int, int]] = []
    geometry = _Geometry(machine)
    for i, ins in enumerate(log.instructions):
        nbytes = int(ins.args.get("bytes", 0))
        read[i] = nbytes if ins.op in READS_DRAM else 0
        write[i] = nbytes if ins.op in WRITES_DRAM else 0
        lx[i] = lx_bytes(ins, machine)
        rows += [(i, link, sticks) for link, sticks in geometry.sticks_per_link(ins).items()]
    table = np.array(rows, np.int64).reshape(-1, 3)
    return Traffic(read, write, lx, table[:, 0], table[:, 1], table[:, 2])


class _Geometry:
    """Ring stops of the units and of each DRAM channel; routes between stops."""

    def __init__(self, machine: Machine) -> None:
        d = machine.dram
        per_mc = d.channels // d.controllers
        self.channel_stop = np.array([machine.stop_of(f"mc{c // per_mc}") for c in range(d.channels)])
        self.interleave, self.channels = d.interleave_bytes, d.channels
        self.stops = len(machine.ring.stops)
        self.machine = machine

    def unit_stop(self, ins: Instruction) -> int:
        return self.machine.stop_of(HOST_UNIT if ins.unit == HOST_UNIT else f"core{ins.core}")

    def sticks_per_link(self, ins: Instruction) -> dict[int, int]:
        """Sticks this instruction put on each ring link."""
        out: dict[int, int] = {}
        if ins.op == "send":
            ends = [(self.unit_stop(ins), self.machine.stop_of(f"core{ins.args['to_core']}"),
                     int(ins.args["bytes"]) // STICK_BYTES)]
        elif ins.op in READS_DRAM | WRITES_DRAM:
            ends = self._dram_ends(ins)
        else:
            return out
        for src, dst, sticks in ends:
            for link in _route(self.stops, src, dst):
                out[link] = out.get(link, 0) + sticks
        return out

    def _dram_ends(self, ins: Instruction) -> list[tuple[int, int, int]]:
        """(from stop, to stop, sticks) for each channel the transfer touches."""
        addrs = np.concatenate([np.arange(addr, addr + n, STICK_BYTES) for addr, n in dram_pieces(ins.args)])
        per_channel = np.bincount((addrs // self.interleave) % self.channels, minlength=self.channels)
        unit = self.unit_stop(ins)
        ends = []
        for channel in np.flatnonzero(per_channel):
            mc, sticks = int(self.channel_stop[channel]), int(per_channel[channel])
            if "to" in ins.args:
                dsts = [self.machine.stop_of(f"core{c}") for c in ins.args["to"]]
                ends += [(mc, far, sticks) for far in self.machine.ring.multicast_legs(mc, dsts)]
            else:
                ends.append((mc, unit, sticks) if ins.op in READS_DRAM else (unit, mc, sticks))
        return ends


@cache
def _route(stops: int, src: int, dst: int) -> tuple[int, ...]:
    """Links crossed from ``src`` to ``dst``: the shorter way, ties clockwise (engine/ring.py)."""
    clockwise = (dst - src) % stops
    direction = 0 if clockwise <= stops - clockwise else 1
    step, hops = (1, clockwise) if direction == 0 else (-1, stops - clockwise)
    return tuple(2 * ((src + h * step) % stops) + direction for h in range(hops))


def lx_bytes(ins: Instruction, machine: Machine) -> int:
    """Bytes this instruction reads from and writes to LX (a send: both scratchpads)."""
    a = ins.args
    if ins.op in ("load", "store", "lx2fifo", "fifo2lx"):
        return int(a["bytes"])
    if ins.op == "send":
        return 2 * int(a["bytes"])
    if ins.op == "matmul":
        return _matmul_sticks(a, machine) * STICK_BYTES
    if ins.op in SFU_OPS:
        return _sfu_sticks(ins.op, a) * STICK_BYTES
    return 0


def _matmul_sticks(a: dict, machine: Machine) -> int:
    dtype = str(a.get("dtype", "fp16"))
    cols = int(a.get("cols", machine.pt.cols_per_pass))
    per_row = matmul_a_sticks(a, DTYPE_BYTES[dtype])[0]
    b = -(-int(a["k"]) * cols * DTYPE_BYTES[dtype] // STICK_BYTES)
    c = int(a["rows"]) * -(-cols * DTYPE_BYTES["fp16"] // STICK_BYTES)
    return int(a["rows"]) * per_row + b + c * (2 if a.get("accumulate") else 1)


def _sfu_sticks(op: str, a: dict) -> int:
    spec, sticks = SFU_OPS[op], int(a["sticks"])
    read = sum(1 if a.get(f"{name}_broadcast") else sticks
               for name in SFU_OPERANDS[:spec.arity] if a[name] != "fifo")
    written = 0 if a["out"] == "fifo" else (1 if spec.shape == "sticks" else sticks)
    return read + written
