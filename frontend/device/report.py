"""What the device has done since it was registered: simulated time, launches, copies, CPU fallbacks,
memory, and the timeline in the trace analyzer's dialect (one launch per kernel program run, each a
kernel on its stream; copies and host work beside them)."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from spyre_emu.host import Copy, Launch
from spyre_emu.results.acelyzer import HOST_PID, device_properties, kernel_events
from spyre_emu.results.chrome import complete_event, metadata, microseconds

from . import state

COPY_TID = 10  # the host's tracks: its own work, then one per DMA direction


@dataclass
class DeviceReport:
    simulated_us: float
    launches: int
    kernels: Counter[str]            # op -> kernel programs run for it
    copies: dict[str, tuple[int, int]]   # direction -> (count, bytes)
    fallbacks: dict[tuple[str, str], int]   # (op, reason) -> count
    memory_allocated: int
    max_memory_allocated: int

    @property
    def fallback_count(self) -> int:
        return sum(self.fallbacks.values())

    def to_text(self) -> str:
        lines = [f"spyre_emu device: {self.simulated_us:.3f} us simulated; {self.launches} launches, "
                 f"{self.fallback_count} CPU fallbacks; memory {self.memory_allocated} B "
                 f"(peak {self.max_memory_allocated} B)"]
        lines += [f"copy {d}: {n} × {b} B" for d, (n, b) in sorted(self.copies.items())]
        lines += [f"card {op}: {n}" for op, n in self.kernels.most_common()]
        lines += [f"fallback {op}: {n} ({reason})" for (op, reason), n in sorted(self.fallbacks.items())]
        return "\n".join(lines) + "\n"

    def chrome_trace(self) -> str:
        """The device's timeline so far, for Perfetto or IBM's trace analyzer (acelyzer)."""
        dev = state.current()
        return json.dumps({"traceEvents": _trace(dev), "deviceProperties": device_properties(dev.machine)})


def report() -> DeviceReport:
    dev = state.current()
    timeline = dev.log.timeline()
    copies: dict[str, tuple[int, int]] = {}
    kernels: Counter[str] = Counter()
    for e in dev.log.entries:
        if isinstance(e.op, Copy):
            n, b = copies.get(e.op.direction, (0, 0))
            copies[e.op.direction] = (n + 1, b + e.op.nbytes)
        elif isinstance(e.op, Launch):
            kernels[e.label] += 1
    dev.store.sweep(collect=True)
    memory = dev.store.memory.stats
    return DeviceReport(round(timeline.end_us, 6), sum(kernels.values()), kernels, copies, dict(dev.log.fallbacks),
                        memory.allocated, memory.peak)


def _trace(dev: state.Device) -> list[dict[str, Any]]:
    """Each kernel program's span on the card as a kernel (its dispatch counted as DMA-in time)."""
    ghz = dev.machine.clock.ghz
    dispatch = dev.machine.launch_us()
    rows = []
    for span in dev.log.timeline().spans:
        if not span.where.endswith(".compute"):
            continue
        start, end = round(span.start * ghz * 1000), round(span.end * ghz * 1000)
        exec_start = min(round((span.start + dispatch) * ghz * 1000), end)
        rows.append({"name": f"{span.index}_{span.what}", "op": span.what, "start_cycle": start,
                     "exec_start_cycle": exec_start, "exec_end_cycle": end, "end_cycle": end,
                     "pt_utilization": 0.0, "ideal_cycles": 0})
    rows.sort(key=lambda r: r["start_cycle"])
    # the host's wait ends a cycle after the last kernel: an Exec event's float end may pass its cycle by an ulp
    total = max((r["end_cycle"] for r in rows), default=0) + 1
    return kernel_events(rows, dev.machine, total) + _copies(dev)


def _copies(dev: state.Device) -> list[dict[str, Any]]:
    """The PCIe transfers and host work, one track each beside the kernels."""
    us = microseconds(dev.machine)
    ghz = dev.machine.clock.ghz
    tracks = {"host": 0}
    events = []
    for span in dev.log.timeline().spans:
        if span.where.endswith(".compute"):
            continue
        where = span.where.split(".")[-1]
        tid = tracks.setdefault(where, len(tracks))
        events.append(complete_event(HOST_PID, COPY_TID + tid, span.what, "memcpy" if tid else "host",
                                     round(span.start * ghz * 1000), round(span.end * ghz * 1000), us, {}))
    return [metadata(HOST_PID, "thread_name", where, COPY_TID + tid) for where, tid in tracks.items()] + events
