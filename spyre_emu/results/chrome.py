"""Chrome Trace Event primitives shared by the timeline and the trace analyzer's dialect: cycles to
microseconds, complete events, metadata events, lanes for spans that overlap, track ids."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ..config import Machine

DECIMALS = 4
TRACKS_PER_PROCESS = 1000


def microseconds(machine: Machine) -> Callable[[int], float]:
    """Cycles -> microseconds to 0.1 ns (DECIMALS): the trace analyzer rounds event ends to 4 decimals
    when it checks that the events of a track do not overlap, so a start must round as the previous
    end did. Cycles (0.9 ns at 1.1 GHz) stay distinct; exact cycles go in ``args``."""
    scale = 1.0 / (machine.clock.ghz * 1000.0)
    return lambda cycles: truncates_right(round(cycles * scale, DECIMALS))


def truncates_right(us: float) -> float:
    """``us`` or the next floats above it, until Perfetto, which reads µs times as whole ns truncated,
    reads the ns it means: 8.04 is stored just below and would read 8039 ns, overlapping an event that
    ends at 8040 (0.12 from 7.92). Rounding to DECIMALS still gives ``us``."""
    whole_ns = round(us * 10 ** DECIMALS) // 10 ** (DECIMALS - 3)
    while int(us * 1000) < whole_ns:
        us = math.nextafter(us, math.inf)
    return us


def complete_event(pid: int, tid: int, name: str, cat: str, start: int, end: int, us: Callable[[int], float],
                   args: dict[str, Any]) -> dict[str, Any]:
    """An "X" event from ``start`` to ``end`` cycles whose end is exactly ``us(end)``."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": us(start),
            "dur": truncates_right(round(us(end) - us(start), DECIMALS)), "args": args}


def lanes(spans: list[tuple[int, int]]) -> list[int]:
    """A lane (0, 1, ...) per (start, end) span, sorted by start, so that the spans of one lane never
    overlap: each takes the lowest lane free at its start. Perfetto and the trace analyzer both want the
    slices of one track to nest or follow each other; work that overlaps goes on tracks side by side."""
    free_at: list[int] = []
    out = []
    for start, end in spans:
        lane = next((k for k, t in enumerate(free_at) if t <= start), len(free_at))
        free_at[lane:lane + 1] = [end]
        out.append(lane)
    return out


def track_id(pid: int, track: int) -> int:
    """A track's tid, unique in the file: Perfetto's importer applies a "thread_name" by tid alone, so a
    tid reused in two processes names (and may merge) the other's thread."""
    return pid * TRACKS_PER_PROCESS + track


def metadata(pid: int, name: str, value: Any, tid: int = 0) -> dict[str, Any]:
    """A process or thread name or sort index; the analyzer wants a ``ts`` on every "M" event."""
    key = "sort_index" if name.endswith("sort_index") else "name"
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": {key: value}}
