"""Everything the device did, in issue order, as the host runtime model's ops (spyre_emu.host): kernel
launches with their simulated time, PCIe copies, event records, host waits. ``timeline()`` runs
the host model over the whole log (simpy; kept until the log grows), so every figure, from an
event's time to the report, comes from one simulation of one history.

A CPU fallback is listed by name with its reason and its operands' copies; its CPU time is not
simulated (this machine is not the card's host).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from spyre_emu.config import Machine
from spyre_emu.host import Copy, Host, Launch, Record, Timeline, Wait, simulate_host

from ..report import FrontendReport

SYNC = "synchronize"


@dataclass(frozen=True)
class Entry:
    """One op of the log and what it was: the front end's report for a launch."""

    op: Launch | Copy | Record | Wait
    label: str
    report: FrontendReport | None = None


class Log:
    def __init__(self, machine: Machine, host: Host):
        self.machine, self.host = machine, host
        self.entries: list[Entry] = []
        self.fallbacks: Counter[tuple[str, str]] = Counter()
        self.syncs = 0
        self._timeline: tuple[int, Timeline] | None = None

    def launch(self, name: str, card_us: float, stream: int, report: FrontendReport | None = None,
               program: str | None = None) -> None:
        """``program`` names the kernel program (its first launch builds it, docs/host.md); ``name``
        labels it in the report."""
        self.entries.append(Entry(Launch(program or name, card_us, stream), name, report))

    def copy(self, direction: str, nbytes: int, stream: int, label: str) -> None:
        self.entries.append(Entry(Copy(direction, nbytes, stream), label))

    def record(self, event: str, stream: int) -> None:
        self.entries.append(Entry(Record(event, stream), f"record {event}"))

    def wait(self, event: str) -> None:
        self.entries.append(Entry(Wait(event), f"wait {event}"))

    def fallback(self, op: str, reason: str) -> None:
        self.fallbacks[(op, reason)] += 1

    def synchronize(self) -> None:
        """The host waits for every stream used so far (one event per stream)."""
        streams = sorted({e.op.stream for e in self.entries if isinstance(e.op, Launch | Copy)})
        self.syncs += 1
        for s in streams:
            self.record(f"{SYNC}{self.syncs}.{s}", s)
            self.wait(f"{SYNC}{self.syncs}.{s}")

    def timeline(self) -> Timeline:
        if self._timeline is None or self._timeline[0] != len(self.entries):
            ops = [e.op for e in self.entries]
            self._timeline = (len(ops), simulate_host(ops, self.host, self.machine))
        return self._timeline[1]

    def event_us(self, index: int) -> float:
        """When the record at ``index`` is reached on its stream: after the stream's work issued before
        it, and not before the host issued it."""
        return max(self._stream_end(index), self._host_us(index))

    def _stream_end(self, index: int) -> float:
        """The end on the card of the last work issued on the record's stream before it (0 if none)."""
        stream = self.entries[index].op.stream
        return max((s.end for s in self.timeline().spans if s.index < index and s.where != "host"
                    and self.entries[s.index].op.stream == stream), default=0.0)

    def _host_us(self, index: int) -> float:
        """When the host thread issues entry ``index``: after its own work (graph builds) and every
        wait before it, each until the host learns of the event's work (``completion_us`` after it
        ends; at once for an event on an idle stream). A full compute queue's hold is not counted."""
        spans = self.timeline().spans
        at = max((s.end for s in spans if s.where == "host" and s.index < index), default=0.0)
        recorded: dict[str, int] = {}
        for i, e in enumerate(self.entries[:index]):
            if isinstance(e.op, Record):
                recorded[e.op.event] = i
            elif isinstance(e.op, Wait):
                r = recorded[e.op.event]
                end = self._stream_end(r)   # 0: the stream had no work (every op takes time)
                at = max(at, end + self.host.runtime.completion_us if end else self._host_us(r))
        return at
