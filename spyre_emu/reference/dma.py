"""DMA units (load, store, send; the host's PCIe unit): bursts, the in-flight budget, ports.

A transfer (a strided load or store: each of its pieces) is cut into bursts of at most
``max_burst_bytes`` that never cross a multiple of it, issued in order while the unit's
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
  passes. The budget counts copies (``max_inflight_bytes`` per destination).

A stick is delivered when it reaches its destination stop (a write request when its data is
written); the instruction ends the cycle after its last LX write (writes: when the last request's
data is in DRAM). The PCIe unit issues its first bursts ``latency_cycles`` late.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass

import simpy

from ..config import STICK_BYTES, Machine
from ..unit_program import Instruction
from .dram import Channel, Request, channel_of
from .lx import Port
from .order import At, Kind, Wake
from .ring import Ring, Role


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


class DmaUnit:
    def __init__(self, fabric: Fabric, unit: int, stop: int, port: Port, latency: int = 0):
        self.fabric, self.env, self.unit, self.stop = fabric, fabric.env, unit, stop
        self.port, self.latency = port, latency
        self.requests = 0   # requests issued so far: their place in the canonical order
        # The transfer under way: its op, where issue has got to, bytes outstanding, sticks to deliver.
        self.op, self.to_core, self.to = "", -1, ()
        self.addr = self.to_issue = self.inflight = self.left = 0
        self.piece = self.stride = self.piece_left = 0
        self.finished = Wake(self.env)

    def run(self, ins: Instruction) -> Generator:
        """Move the instruction's bytes; returns at its END event."""
        a = ins.args
        self.op, self.to_core, self.to = ins.op, a.get("to_core", -1), tuple(a.get("to", ()))
        self.addr = a["lx"] if ins.op == "send" else a["dram"]
        self.piece = self.piece_left = a.get("piece", a["bytes"])
        self.stride = a.get("stride", self.piece)
        self.to_issue, self.inflight, self.left = a["bytes"], 0, a["bytes"] // STICK_BYTES * self.copies
        self.finished = Wake(self.env)
        self._issue(self.env.now + self.latency)
        yield self.finished

    @property
    def copies(self) -> int:
        """Copies of each stick the transfer delivers (a multicast: one per destination)."""
        return max(1, len(self.to))

    def _issue(self, cycle: int) -> None:
        machine = self.fabric.machine
        burst_bytes, budget = machine.dma.max_burst_bytes, machine.dma.max_inflight_bytes
        while self.to_issue:
            burst = min(self.piece_left, burst_bytes - self.addr % burst_bytes)
            if self.inflight + burst * self.copies > budget * self.copies:
                return
            self.inflight += burst * self.copies
            if self.op == "send":
                for _ in range(burst // STICK_BYTES):
                    self.env.process(self._send_stick(self.port.take(cycle)))
            else:
                self._issue_requests(self.addr, burst, cycle)
            self.addr += burst
            self.to_issue -= burst
            self.piece_left -= burst
            if not self.piece_left:  # a strided transfer's next piece
                self.addr += self.stride - self.piece
                self.piece_left = self.piece

    def _issue_requests(self, addr: int, nbytes: int, cycle: int) -> None:
        d = self.fabric.machine.dram
        end = addr + nbytes
        while addr < end:
            piece = min(end, (addr // d.interleave_bytes + 1) * d.interleave_bytes) - addr
            channel = channel_of(d, addr)
            number = self.requests
            self.requests += 1
            if self.op in ("load", "d2h"):
                hops = self.fabric.ring.hops(self.stop, self.fabric.channel_stops[channel])
                arrive = cycle + hops * self.fabric.machine.ring.hop_latency_cycles
                self.env.process(self._read(addr, piece // STICK_BYTES, channel, number, arrive))
            else:
                request = Request(addr, piece // STICK_BYTES, True, self.env.event())
                for _ in range(request.sticks):
                    self.env.process(self._write_stick(self.port.take(cycle), request, channel, number))
            addr += piece

    def _read(self, addr: int, sticks: int, channel: int, number: int, arrive: int) -> Generator:
        yield At(self.env, arrive, Kind.REQUEST, self.unit, number)
        request = Request(addr, sticks, False, self.env.event())
        self.fabric.channels[channel].enqueue(request)
        data = yield request.served
        src = self.fabric.channel_stops[channel]
        dsts = [self.fabric.core_stops[c] for c in self.to]
        legs = self.fabric.machine.ring.multicast_legs(src, dsts)
        for s in range(sticks):
            leave = data + (s + 1) * self.fabric.machine.dram.stick_cycles
            if not self.to:
                self.env.process(self._read_stick(leave, src))
            for far in legs:
                self.env.process(self._multicast_stick(leave, src, far, dsts))

    def _read_stick(self, leave: int, src: int) -> Generator:
        yield from self.fabric.ring.carry(leave, src, self.stop, self.unit, Role.READ, 0)
        self._delivered(1, self.port.take(self.env.now) + 1)

    def _multicast_stick(self, leave: int, src: int, far: int, dsts: list[int]) -> Generator:
        mask = sum(1 << d for d in dsts)

        def write(stop: int) -> None:
            if stop in dsts:
                core = self.fabric.core_stops.index(stop)
                self._delivered(1, self.fabric.rx_ports[core].take(self.env.now) + 1)

        yield from self.fabric.ring.carry(leave, src, far, self.unit, Role.MCAST, mask, write)

    def _write_stick(self, leave: int, request: Request, channel: int, number: int) -> Generator:
        dst = self.fabric.channel_stops[channel]
        yield from self.fabric.ring.carry(leave, self.stop, dst, self.unit, Role.WRITE, number)
        request.arrived += 1
        if request.arrived < request.sticks:
            return
        self.fabric.channels[channel].enqueue(request)
        data = yield request.served
        written = data + request.sticks * self.fabric.machine.dram.stick_cycles
        yield At(self.env, written, Kind.WRITTEN, self.unit, request.sticks)
        self._delivered(request.sticks, self.env.now)

    def _send_stick(self, leave: int) -> Generator:
        dst = self.fabric.core_stops[self.to_core]
        yield from self.fabric.ring.carry(leave, self.stop, dst, self.unit, Role.SEND, self.to_core)
        self._delivered(1, self.fabric.rx_ports[self.to_core].take(self.env.now) + 1)

    def _delivered(self, sticks: int, done: int) -> None:
        """Sticks reached their destination: free their budget; the last one ends the transfer."""
        self.inflight -= sticks * STICK_BYTES
        self.left -= sticks
        if self.left == 0:
            self.finished.fire(done, Kind.END, self.unit)
        else:
            self._issue(self.env.now)
