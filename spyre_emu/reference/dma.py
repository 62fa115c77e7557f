"""DMA units (load, store, send; the host's PCIe unit): bursts, the in-flight budget, ports.

A load, store or send sets up each piece (the whole transfer, or each run of a strided one) for
``piece_setup_cycles`` before it issues any of its requests: from its start, then from the issue of
the previous piece's last request. A transfer (a strided load or store: each of its pieces) is cut
into bursts of at most ``max_burst_bytes`` that never cross a multiple of it, issued in order while the unit's
outstanding bytes stay within ``max_inflight_bytes``; more issue as sticks are delivered. A burst
on DRAM is cut again at ``interleave_bytes`` boundaries into requests, one per channel visit.

- read (load, d2h): a request reaches its controller one hop latency per ring hop after
  issue (requests use no link); when served, stick s leaves the controller ``(s + 1) *
  stick_cycles`` after the data starts, crosses the ring and is written by the unit's port.
- write (store, h2d): each stick leaves through the unit's port, crosses the ring to the
  controller; the request joins the channel's write queue when all its sticks are there,
  and is delivered when its data is in DRAM.
- send: each stick leaves through the unit's port, crosses the ring and is written by the
  receiving core's ring port.
- multicast load (``to``): one read; each stick leaves the controller once per direction with
  destinations, bound for the farthest, and is written by each destination's ring port as it
  passes. Every ``copies`` copies delivered free one stick of the budget.

A stick is delivered when it reaches its destination stop (a write request when its data is
written); the instruction ends the cycle after its last LX write (writes: when the last request's
data is in DRAM), and not before the unit's previous instruction. The unit starts its next
instruction once this one has issued its last request. The PCIe unit issues its first bursts
``latency_cycles`` late.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import simpy

from ..config import STICK_BYTES, Machine
from ..unit_program import Instruction
from .dram import Channel, Request, channel_of
from .lx import Port
from .order import At, Kind, Wake
from .ring import Ring, Role

SET_UP = ("load", "store", "send")  # the transfers whose pieces are set up (PCIe has its latency instead)


@dataclass(frozen=True)
class Fabric:
    """What DMA units share: the ring, the DRAM channels, and where things sit on the ring."""

    env: simpy.Environment
    machine: Machine
    ring: Ring
    channels: list[Channel]
    channel_stops: list[int]   # the ring stop of each channel's controller
    core_stops: list[int]
    rx_ports: list[Port]       # each core's ring receive port


@dataclass
class Transfer:
    """One DMA instruction from its start to its end: what it moves where, and what is still to land."""

    index: int                          # its place in the program (the engine's instruction number)
    ins: Instruction
    ended: Callable[[int], None]        # records its end and signals its tokens
    ready: int = -1                     # when its last stick was written
    left: int = field(init=False)       # sticks (multicast: copies) still to deliver

    def __post_init__(self) -> None:
        self.left = self.ins.args["bytes"] // STICK_BYTES * self.copies

    @property
    def to(self) -> tuple[int, ...]:
        return tuple(self.ins.args.get("to", ()))

    @property
    def copies(self) -> int:
        """Copies of each stick the transfer delivers (a multicast: one per destination)."""
        return max(1, len(self.to))


class DmaUnit:
    """Starts a transfer once the previous one has issued its last request (its descriptor queues
    behind it, sharing the in-flight budget), and ends transfers in order."""

    def __init__(self, fabric: Fabric, unit: int, stop: int, port: Port, latency: int = 0):
        self.fabric, self.env, self.unit, self.stop = fabric, fabric.env, unit, stop
        self.port, self.latency = port, latency
        self.requests = 0   # requests issued so far: their place in the canonical order
        self.inflight = 0   # bytes outstanding, over every transfer under way
        self.queue: deque[Transfer] = deque()  # started and not yet ended, oldest first
        # The transfer being issued: where issue has got to.
        self.current: Transfer | None = None
        self.addr = self.to_issue = self.piece = self.stride = self.piece_left = 0
        self.piece_at, self.wake_at = 0, -1  # when the current piece is set up; the pending wake-up
        self.issued = Wake(self.env)

    def run(self, ins: Instruction, index: int, ended: Callable[[int], None]) -> Generator:
        """Start the instruction; returns once its last request is issued. ``ended`` runs at its END."""
        a = ins.args
        self.current = Transfer(index, ins, ended)
        self.queue.append(self.current)
        self.addr = a["lx"] if ins.op == "send" else a["dram"]
        self.piece = self.piece_left = a.get("piece", a["bytes"])
        self.stride = a.get("stride", self.piece)
        self.to_issue = a["bytes"]
        self.issued = Wake(self.env)
        if ins.op in SET_UP:
            self.piece_at = self.env.now + self.fabric.machine.dma.piece_setup_cycles
        self._issue(self.env.now + self.latency)
        yield self.issued

    def _issue(self, cycle: int) -> None:
        machine, tr = self.fabric.machine, self.current
        burst_bytes, budget = machine.dma.max_burst_bytes, machine.dma.max_inflight_bytes
        while self.to_issue:
            if cycle < self.piece_at:  # the piece is still being set up
                if self.wake_at != self.piece_at:
                    self.wake_at = self.piece_at
                    self.env.process(self._wake(self.piece_at))
                return
            burst = min(self.piece_left, burst_bytes - self.addr % burst_bytes)
            if self.inflight + burst > budget:
                return
            self.inflight += burst
            if tr.ins.op == "send":
                for _ in range(burst // STICK_BYTES):
                    self.env.process(self._send_stick(tr, self.port.take(cycle)))
            else:
                self._issue_requests(tr, self.addr, burst, cycle)
            self.addr += burst
            self.to_issue -= burst
            self.piece_left -= burst
            if not self.piece_left:  # a strided transfer's next piece, set up from now
                self.addr += self.stride - self.piece
                self.piece_left = self.piece
                if tr.ins.op in SET_UP:
                    self.piece_at = cycle + machine.dma.piece_setup_cycles
            if not self.to_issue:  # all issued: the unit may start its next instruction
                self.issued.fire(cycle, Kind.START, self.unit)

    def _wake(self, cycle: int) -> Generator:
        yield At(self.env, cycle, Kind.ISSUE, self.unit)
        self._issue(self.env.now)

    def _issue_requests(self, tr: Transfer, addr: int, nbytes: int, cycle: int) -> None:
        d = self.fabric.machine.dram
        end = addr + nbytes
        while addr < end:
            piece = min(end, (addr // d.interleave_bytes + 1) * d.interleave_bytes) - addr
            channel = channel_of(d, addr)
            number = self.requests
            self.requests += 1
            if tr.ins.op in ("load", "d2h"):
                hops = self.fabric.ring.hops(self.stop, self.fabric.channel_stops[channel])
                arrive = cycle + hops * self.fabric.machine.ring.hop_latency_cycles
                self.env.process(self._read(tr, addr, piece // STICK_BYTES, channel, number, arrive))
            else:
                request = Request(addr, piece // STICK_BYTES, True, self.env.event())
                for _ in range(request.sticks):
                    self.env.process(self._write_stick(tr, self.port.take(cycle), request, channel, number))
            addr += piece

    def _read(self, tr: Transfer, addr: int, sticks: int, channel: int, number: int, arrive: int) -> Generator:
        yield At(self.env, arrive, Kind.REQUEST, self.unit, number)
        request = Request(addr, sticks, False, self.env.event())
        self.fabric.channels[channel].enqueue(request)
        data = yield request.served
        src = self.fabric.channel_stops[channel]
        dsts = [self.fabric.core_stops[c] for c in tr.to]
        legs = self.fabric.machine.ring.multicast_legs(src, dsts)
        for s in range(sticks):
            leave = data + (s + 1) * self.fabric.machine.dram.stick_cycles
            if not tr.to:
                self.env.process(self._read_stick(tr, leave, src))
            for far in legs:
                self.env.process(self._multicast_stick(tr, leave, src, far, dsts))

    def _read_stick(self, tr: Transfer, leave: int, src: int) -> Generator:
        yield from self.fabric.ring.carry(leave, src, self.stop, self.unit, Role.READ, tr.index)
        self._delivered(tr, 1, self.port.take(self.env.now) + 1)

    def _multicast_stick(self, tr: Transfer, leave: int, src: int, far: int, dsts: list[int]) -> Generator:
        def write(stop: int) -> None:
            if stop in dsts:
                core = self.fabric.core_stops.index(stop)
                self._delivered(tr, 1, self.fabric.rx_ports[core].take(self.env.now) + 1)

        yield from self.fabric.ring.carry(leave, src, far, self.unit, Role.MCAST, tr.index, write)

    def _write_stick(self, tr: Transfer, leave: int, request: Request, channel: int, number: int) -> Generator:
        dst = self.fabric.channel_stops[channel]
        yield from self.fabric.ring.carry(leave, self.stop, dst, self.unit, Role.WRITE, number)
        request.arrived += 1
        if request.arrived < request.sticks:
            return
        self.fabric.channels[channel].enqueue(request)
        data = yield request.served
        written = data + request.sticks * self.fabric.machine.dram.stick_cycles
        yield At(self.env, written, Kind.WRITTEN, self.unit, request.sticks, tr.index)
        self._delivered(tr, request.sticks, self.env.now)

    def _send_stick(self, tr: Transfer, leave: int) -> Generator:
        to_core = tr.ins.args["to_core"]
        dst = self.fabric.core_stops[to_core]
        yield from self.fabric.ring.carry(leave, self.stop, dst, self.unit, Role.SEND, tr.index)
        self._delivered(tr, 1, self.fabric.rx_ports[to_core].take(self.env.now) + 1)

    def _delivered(self, tr: Transfer, sticks: int, done: int) -> None:
        """Sticks reached their destination: free their budget; the last one ends the transfer at
        ``done`` once every earlier transfer has ended."""
        total = tr.ins.args["bytes"] // STICK_BYTES * tr.copies
        before = (total - tr.left) // tr.copies
        tr.left -= sticks
        self.inflight -= ((total - tr.left) // tr.copies - before) * STICK_BYTES
        if tr.left == 0:
            tr.ready = done
            if tr is self.queue[0]:
                self.env.process(self._end(done))
        self._issue(self.env.now)

    def _end(self, cycle: int) -> Generator:
        """The oldest transfer ends at ``cycle``; the next, if already delivered, ends after it."""
        yield At(self.env, cycle, Kind.END, self.unit)
        self.queue.popleft().ended(self.env.now)
        if self.queue and self.queue[0].left == 0:
            self.env.process(self._end(max(self.env.now, self.queue[0].ready)))
