"""LPDDR5 channels and banks (docs/decisions/dram.md, docs/unit-program.md "DRAM").

Each channel is a simpy process serving two first-come-first-served queues, reads and
writes, one request at a time in order: it picks the next request when the previous one's
column command issues (or when a request arrives to an idle channel), after every request
reaching it that cycle (PICK is the last kind of a cycle). When both queues wait it takes
the direction it did not take last (a read first). Serving a request works out its
command timing from the bank's open row and the data bus, and returns when its data starts.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Generator
from dataclasses import dataclass, field

import simpy

from ..config import Machine
from ..config.machine import Dram
from .order import At, Kind


def channel_of(d: Dram, addr: int) -> int:
    """Addresses interleave over the channels every ``interleave_bytes`` (hashed: ``Dram.channel_of``)."""
    return d.channel_of(addr)


@dataclass
class Request:
    """Consecutive sticks of one interleave unit; ``served`` fires with the data start cycle."""

    addr: int
    sticks: int
    is_write: bool
    served: simpy.Event
    arrived: int = 0   # sticks of a write already at the controller


@dataclass
class Bank:
    row: int | None = None   # the open row
    col_ok: int = 0          # earliest column command to the open row (ACT + tRCD)
    act_ok: int = 0          # earliest ACT while closed (after a refresh or auto-precharge)
    pre_ok: int = 0          # earliest PRE of the open row (ACT + tRAS, write end + tWR)


@dataclass
class Channel:
    env: simpy.Environment
    machine: Machine
    index: int
    reads: deque[Request] = field(default_factory=deque)
    writes: deque[Request] = field(default_factory=deque)
    cmd: int = 0                    # cycle of the last column command
    bus: int = 0                    # cycle the data bus is next free
    last_write: bool | None = None  # direction of the last request
    next_refresh: int = 0
    banks: list[Bank] = field(default_factory=list)
    arrived: simpy.Event | None = None

    def __post_init__(self) -> None:
        d = self.machine.dram
        self.banks = [Bank() for _ in range(d.banks)]
        self.next_refresh = d.t_refi_cycles + self.index * (d.t_refi_cycles // d.channels)
        self.env.process(self.run())

    def enqueue(self, request: Request) -> None:
        (self.writes if request.is_write else self.reads).append(request)
        if self.arrived is not None and not self.arrived.triggered:
            self.arrived.succeed()

    def run(self) -> Generator:
        while True:
            if not self.reads and not self.writes:
                self.arrived = self.env.event()
                yield self.arrived
            yield At(self.env, max(self.env.now, self.cmd), Kind.PICK, self.index)
            request = self._pick()
            request.served.succeed(self._serve(request))

    def _pick(self) -> Request:
        if self.reads and self.writes:
            take_write = self.last_write is False
        else:
            take_write = bool(self.writes)
        return (self.writes if take_write else self.reads).popleft()

    def _serve(self, request: Request) -> int:
        """Issue the request's commands; return the cycle its data starts on the bus."""
        d = self.machine.dram
        bank, row = self._locate(request.addr)
        start = self._refresh(max(self.env.now, self.cmd))
        if bank.row == row:
            col = max(start, bank.col_ok)
        else:
            act = max(start, bank.act_ok) if bank.row is None else max(start, bank.pre_ok) + d.t_rp_cycles
            bank.row, bank.col_ok, bank.pre_ok = row, act + d.t_rcd_cycles, act + d.t_ras_cycles
            col = bank.col_ok
        latency = d.t_wl_cycles if request.is_write else d.t_rl_cycles
        data = max(col + latency, self.bus)
        if self.last_write is not None and self.last_write != request.is_write:
            turn = self.bus + d.t_rtw_cycles if request.is_write else self.bus + d.t_wtr_cycles + latency
            data = max(data, turn)
        end = data + request.sticks * d.stick_cycles
        self.cmd, self.bus, self.last_write = data - latency, end, request.is_write
        if request.is_write:
            bank.pre_ok = max(bank.pre_ok, end + d.t_wr_cycles)
        if d.page_policy == "closed":  # auto-precharge after the read's column commands (writes: tWR)
            precharge = max(bank.pre_ok, col + request.sticks * d.stick_cycles)
            bank.row, bank.act_ok = None, precharge + d.t_rp_cycles
        return data

    def _locate(self, addr: int) -> tuple[Bank, int]:
        """The bank and row of ``addr``: rows within the channel, banks XOR-hashed."""
        d = self.machine.dram
        unit, offset = divmod(addr, d.interleave_bytes)
        local = (unit // d.channels) * d.interleave_bytes + offset
        row_index = local // d.row_bytes
        bank = (row_index ^ (row_index // d.banks)) % d.banks
        return self.banks[bank], row_index // d.banks

    def _refresh(self, start: int) -> int:
        """Take every all-bank refresh due by ``start``; return when commands may issue."""
        d = self.machine.dram
        while start >= self.next_refresh:
            done = max(self.next_refresh, self.bus) + d.t_rfc_cycles
            for bank in self.banks:
                bank.row, bank.act_ok = None, done
            self.next_refresh += d.t_refi_cycles
            start = max(start, done)
        return start
