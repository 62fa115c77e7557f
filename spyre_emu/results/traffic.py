"""What each instruction moved: DRAM bytes, sticks per ring link, LX bytes.

The engine counts sticks per ring link for the whole run only. Reports need them per kernel
and over time, so this module retraces every transfer's route from its addresses and the
ring's geometry, with the engine's rules: a stick at DRAM address ``a`` is served by channel
``Dram.channel_of(a)`` at its controller's ring stop (engine/dma.py), and a
stick takes the shorter way round, ties clockwise (engine/ring.py), and a multicast stick goes
once each way to its farthest destination (``Ring.multicast_legs``). The per-link sums equal
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
from ..unit_program import HOST_CORE, Instruction
from ..unit_program.model import dma_shape, matmul_a_sticks, matmul_repeat
from ..unit_program.opcodes import HOST_UNIT, SFU_OPERANDS, SFU_OPS
from .distinct import Distinct, distinct

READS_DRAM = {"load", "d2h"}
WRITES_DRAM = {"store", "h2d"}
DRAM_OPS = READS_DRAM | WRITES_DRAM
CHUNK_STICKS = 1 << 20  # sticks whose addresses channel_sticks holds at once (8 MB per array)


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


def trace_traffic(log: EventLog, machine: Machine, kinds: Distinct | None = None) -> Traffic:
    """``kinds``: the log's distinct instructions (``distinct``), each traced once."""
    n = len(log.instructions)
    geometry = _Geometry(machine)
    kinds = distinct(log.instructions) if kinds is None else kinds
    dma = {id(ins.args): ins.args for ins in kinds.first if ins.op in DRAM_OPS}
    channels = dict(zip(dma, geometry.channel_sticks(list(dma.values())), strict=True))
    # per distinct instruction: DRAM bytes read and written, LX bytes, its transfer shape's index in geometry.shapes
    figures = np.array([_figures(ins, machine, geometry, channels) for ins in kinds.first], np.int64)
    read, write, lx, shape = figures.reshape(-1, 4)[kinds.which].T
    # Each instruction's rows of (link, sticks), in instruction order, gathered from its shape's rows.
    sizes = np.array([len(links) for links in geometry.shapes], np.int64)
    table = np.array([row for links in geometry.shapes for row in links], np.int64).reshape(-1, 2)
    counts = sizes[shape]
    ins_of_row = np.repeat(np.arange(n), counts)
    first_row = np.cumsum(sizes) - sizes
    rows = first_row[shape][ins_of_row] + np.arange(len(ins_of_row)) - (np.cumsum(counts) - counts)[ins_of_row]
    return Traffic(read.copy(), write.copy(), lx.copy(), ins_of_row, table[rows, 0], table[rows, 1])


def _figures(ins: Instruction, machine: Machine, geometry: _Geometry,
             channels: dict[int, tuple[tuple[int, int], ...]]) -> tuple[int, int, int, int]:
    """(DRAM bytes read, DRAM bytes written, LX bytes, transfer shape) of one instruction."""
    dram = int(ins.args["bytes"]) if ins.op in DRAM_OPS else 0
    shape = geometry.shape_of(ins, channels.get(id(ins.args), ())) if ins.op in DRAM_OPS or ins.op == "send" else 0
    return (dram if ins.op in READS_DRAM else 0, dram if ins.op in WRITES_DRAM else 0, lx_bytes(ins, machine), shape)


class _Geometry:
    """Ring stops of the units and of each DRAM channel; routes between stops.

    Programs repeat transfer shapes, so each shape's links are worked out once: a DMA's links depend
    only on its direction, its unit's stop, its multicast destinations and the sticks it moves on each
    channel. Those counts come from one pass over every DMA's stick addresses (``channel_sticks``):
    under a hashed channel map nearly every address is new, but the counts repeat."""

    def __init__(self, machine: Machine) -> None:
        d = machine.dram
        per_mc = d.channels // d.controllers
        self.channel_stop = np.array([machine.stop_of(f"mc{c // per_mc}") for c in range(d.channels)])
        self.channels = d.channels
        self.stops = len(machine.ring.stops)
        self.machine = machine
        self.shapes: list[tuple[tuple[int, int], ...]] = [()]  # per shape: (link, sticks) rows; 0 moves nothing
        self._index: dict[tuple, int] = {}
        self._stops = {core: machine.stop_of(f"core{core}") for core in range(machine.cores.count)}
        self._stops[HOST_CORE] = machine.stop_of(HOST_UNIT)

    def channel_sticks(self, dmas: list[dict]) -> list[tuple[tuple[int, int], ...]]:
        """Per DMA (its args), the (channel, sticks) it moves on each channel it touches. Each stick's
        address is materialised, so DMAs go in batches that close once they reach CHUNK_STICKS sticks:
        memory stays bounded whatever the program moves."""
        out: list[tuple[tuple[int, int], ...]] = []
        batch: list[dict] = []
        sticks = 0
        for a in dmas:
            batch.append(a)
            sticks += -(-int(a["bytes"]) // STICK_BYTES)
            if sticks >= CHUNK_STICKS:
                out += self._channel_sticks(batch)
                batch, sticks = [], 0
        return out + (self._channel_sticks(batch) if batch else [])

    def _channel_sticks(self, dmas: list[dict]) -> list[tuple[tuple[int, int], ...]]:
        """Counted per interleave line, not per stick: a stick's channel is its line's (``Dram.channel_of``),
        so each line the pieces touch counts the sticks that start in it. The pieces (``dram_pieces``) are
        spelled out with numpy from each DMA's four numbers (a layer's programs have 100,000s of DMAs)."""
        dram, total, piece, stride = np.array([(a["dram"], *dma_shape(a)) for a in dmas], np.int64).reshape(-1, 4).T
        counts = total // piece
        owner = np.repeat(np.arange(len(dmas)), counts)
        nth = np.arange(len(owner)) - np.repeat(np.cumsum(counts) - counts, counts)  # each piece's index in its DMA
        starts = dram[owner] + nth * stride[owner]
        sticks = -(-piece[owner] // STICK_BYTES)
        ends = starts + sticks * STICK_BYTES
        size = self.machine.dram.interleave_bytes
        first = starts // size
        lines = (ends - STICK_BYTES) // size - first + 1  # the lines holding a stick's first byte
        piece = np.repeat(np.arange(len(starts)), lines)
        line = np.repeat(first - (np.cumsum(lines) - lines), lines) + np.arange(int(lines.sum()))
        # The sticks in [lo, hi): addresses and lines are whole sticks (the loader's checks; interleave_bytes is
        # a power of two of at least a stick), so the bytes between are a whole number of sticks.
        lo, hi = np.maximum(line * size, starts[piece]), np.minimum((line + 1) * size, ends[piece])
        sticks = (hi - lo) // STICK_BYTES
        per = np.bincount(owner[piece] * self.channels + self.machine.dram.channel_of(line * size), sticks,
                          minlength=len(dmas) * self.channels).astype(np.int64).reshape(len(dmas), self.channels)
        dma, channel = np.nonzero(per)  # DMA by DMA
        rows = list(zip(channel.tolist(), per[dma, channel].tolist(), strict=True))
        bounds = np.searchsorted(dma, np.arange(len(dmas) + 1)).tolist()
        return [tuple(rows[lo:hi]) for lo, hi in zip(bounds, bounds[1:], strict=False)]

    def shape_of(self, ins: Instruction, channels: tuple[tuple[int, int], ...] = ()) -> int:
        """The index of the instruction's transfer shape in ``shapes`` (0: it puts nothing on the ring);
        ``channels``: a DMA's sticks per channel (``channel_sticks``)."""
        if ins.op == "send":
            shape = ("send", self._stops[ins.core], self._stops[int(ins.args["to_core"])], int(ins.args["bytes"]))
        elif ins.op in DRAM_OPS:
            shape = (ins.op in READS_DRAM, self._stops[ins.core], channels,
                     tuple(self._stops[c] for c in ins.args.get("to", ())))
        else:
            return 0
        index = self._index.get(shape)
        if index is None:
            index = self._index[shape] = len(self.shapes)
            self.shapes.append(self._shape_links(*shape))
        return index

    def _shape_links(self, kind: str | bool, unit: int, *rest: object) -> tuple[tuple[int, int], ...]:
        ends = [(unit, rest[0], rest[1] // STICK_BYTES)] if kind == "send" else self._dram_ends(kind, unit, *rest)
        out: dict[int, int] = {}
        for src, dst, sticks in ends:
            for link in _route(self.stops, src, dst):
                out[link] = out.get(link, 0) + sticks
        return tuple(out.items())

    def _dram_ends(self, reads: bool, unit: int, channels: tuple[tuple[int, int], ...],
                   to: tuple[int, ...]) -> list[tuple[int, int, int]]:
        """(from stop, to stop, sticks) for each channel the transfer touches; a multicast read goes from
        each channel's controller to the farthest destination each way."""
        ends = []
        for channel, sticks in channels:
            mc = int(self.channel_stop[channel])
            if to:
                ends += [(mc, far, sticks) for far in self.machine.ring.multicast_legs(mc, list(to))]
            else:
                ends.append((mc, unit, sticks) if reads else (unit, mc, sticks))
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
    return matmul_repeat(a) * (int(a["rows"]) * per_row + b + c * (2 if a.get("accumulate") else 1))


_BROADCAST = [(name, f"{name}_broadcast") for name in SFU_OPERANDS]  # spelled once: a report asks 100,000s of times


def _sfu_sticks(op: str, a: dict) -> int:
    spec, sticks = SFU_OPS[op], int(a["sticks"])
    read = 0
    for name, broadcast in _BROADCAST[:spec.arity]:
        if a[name] != "fifo":
            read += 1 if a.get(broadcast) else sticks
    written = 0 if a["out"] == "fifo" else (1 if spec.shape == "sticks" else sticks)
    return read + written
