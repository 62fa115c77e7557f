"""The timeline: one Chrome Trace Event JSON that IBM's trace analyzer and Perfetto both read.

Processes, top to bottom: the card's kernel streams and its counters (DRAM GB/s, ring occupancy, PT
busy); the host, whose events enclose the kernels (acelyzer.py owns that dialect) and which runs the
PCIe transfers; the ring, one counter track per link with traffic, grouped by direction; then one
process per core with a track per unit (and lanes beside it where its instructions overlap), each
instruction a complete event of category "unit". Every track's tid is unique in the file (Perfetto
names threads by tid alone); the card's and the ring's counters sit on their process's track 0, which
no thread name claims.
Timestamps are microseconds at the card's clock; exact cycles are in ``args``. Counters come from
the report's activity bins and change only where a value does.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import Machine
from ..engine.log import EventLog
from ..unit_program.opcodes import CORE_UNITS, HOST_UNIT
from .acelyzer import CARD_PID, HOST_PID, device_properties, kernel_events
from .chrome import complete_event, lanes, metadata, microseconds, track_id

RING_PID, CORE_PID = 2, 100
DIRECTIONS = ("clockwise", "counter-clockwise")


def chrome_trace(log: EventLog, machine: Machine, report: dict[str, Any]) -> str:
    where, tracks = _tracks(log)
    events = _processes(log, tracks) + kernel_events(report["kernels"], machine, log.total_cycles)
    events += _counters(report, machine) + _units(log, machine, where)
    return json.dumps({"traceEvents": events, "deviceProperties": device_properties(machine),
                       "displayTimeUnit": "ns",
                       "otherData": {"program": report["program"], "clock_ghz": machine.clock.ghz,
                                     "total_cycles": log.total_cycles}}) + "\n"


def _processes(log: EventLog, tracks: dict[tuple[int, int], str]) -> list[dict[str, Any]]:
    cores = sorted({ins.core for ins in log.instructions if ins.core >= 0})
    named = [(CARD_PID, "spyre card"), (HOST_PID, "host"), (RING_PID, "ring")]
    named += [(CORE_PID + c, f"core{c}") for c in cores]
    events = []
    for rank, (pid, name) in enumerate(named):
        events += [metadata(pid, "process_name", name), metadata(pid, "process_sort_index", rank)]
    return events + [metadata(pid, "thread_name", name, tid) for (pid, tid), name in tracks.items()]


def _tracks(log: EventLog) -> tuple[list[tuple[int, int]], dict[tuple[int, int], str]]:
    """Each instruction's (pid, tid), and each track's name. A unit's instructions that overlap (a DMA
    unit issues its next descriptor before the current one ends) go on lanes of their own beside the
    unit's first (``load #2``, ...): slices of one track must follow each other. A core's tracks are its
    units in engine order, each followed by its lanes; the host's PCIe unit sits below its launch."""
    by_unit: dict[tuple[int, str], list[int]] = {}
    for i, ins in enumerate(log.instructions):
        by_unit.setdefault((ins.core, ins.unit), []).append(i)
    placed: dict[tuple[int, str, int], list[int]] = {}
    for (core, unit), idx in by_unit.items():
        idx.sort(key=lambda i: (log.start[i], log.end[i]))
        for i, lane in zip(idx, lanes([(int(log.start[i]), int(log.end[i])) for i in idx]), strict=True):
            placed.setdefault((core, unit, lane), []).append(i)
    where: list[tuple[int, int]] = [(0, 0)] * len(log.instructions)
    names: dict[tuple[int, int], str] = {}
    used = {HOST_PID: 1}  # tracks of each process so far: the host's track 0 is its launch
    order = sorted(placed, key=lambda k: (k[0], -1 if k[1] == HOST_UNIT else CORE_UNITS.index(k[1]), k[2]))
    for core, unit, lane in order:
        pid = HOST_PID if unit == HOST_UNIT else CORE_PID + core
        track = (pid, track_id(pid, used.get(pid, 0)))
        used[pid] = used.get(pid, 0) + 1
        names[track] = unit if lane == 0 else f"{unit} #{lane + 1}"
        for i in placed[(core, unit, lane)]:
            where[i] = track
    return where, names


def _units(log: EventLog, machine: Machine, where: list[tuple[int, int]]) -> list[dict[str, Any]]:
    us = microseconds(machine)
    events = []
    for i, ins in enumerate(log.instructions):
        start, end = int(log.start[i]), int(log.end[i])
        pid, tid = where[i]
        events.append(complete_event(pid, tid, ins.op, "unit", start, end, us,
                            {"start_cycle": start, "end_cycle": end, "kernel": ins.kernel, "at": ins.path}))
    return events


def _counters(report: dict[str, Any], machine: Machine) -> list[dict[str, Any]]:
    """Card counters (DRAM GB/s, mean occupancy of all ring links, share of all PT arrays busy) and
    per-direction ring counters, one series per link; a series' last value returns to zero."""
    act = report["activity"]
    bins, width = act["bins"], act["bin_cycles"]
    links = 2 * len(machine.ring.stops)
    arrays = machine.cores.count * machine.cores.corelets
    pt = [t["busy"] for t in act["tracks"] if t["name"].rsplit(".", 1)[-1].startswith("pt")]
    series = {
        (CARD_PID, "DRAM", "GB/s"): act["dram_gb_per_s"],
        (CARD_PID, "ring occupancy", "busy"): [sum(col) / links for col in zip(*[lk["busy"] for lk in act["links"]],
                                                                          strict=True)] or [0.0] * bins,
        (CARD_PID, "PT busy", "busy"): [sum(col) / arrays for col in zip(*pt, strict=True)] or [0.0] * bins,
    }
    for lk in act["links"]:
        direction = DIRECTIONS[_is_counter_clockwise(lk["name"], machine)]
        series[(RING_PID, f"ring {direction}", lk["name"])] = lk["busy"]
    return _counter_events(series, width, report["card_cycles"], machine)


def _is_counter_clockwise(link: str, machine: Machine) -> int:
    stops = machine.ring.stops
    src, dst = (stops.index(s) for s in link.split("->"))
    return int((dst - src) % len(stops) != 1)


def _counter_events(series: dict[tuple[int, str, str], list[float]], width: int, total: int,
                    machine: Machine) -> list[dict[str, Any]]:
    """One "C" event per counter and bin where any of its series changes, and zeros at the end."""
    us = microseconds(machine)
    grouped: dict[tuple[int, str], dict[str, list[float]]] = {}
    for (pid, name, key), values in series.items():
        grouped.setdefault((pid, name), {})[key] = values
    events = []
    for (pid, name), columns in grouped.items():
        previous = None
        for b, row in enumerate(zip(*columns.values(), strict=True)):
            values = {k: round(v, 4) for k, v in zip(columns, row, strict=True)}
            if values != previous:
                events.append({"ph": "C", "name": name, "pid": pid, "tid": track_id(pid, 0), "ts": us(b * width),
                               "args": values})
                previous = values
        events.append({"ph": "C", "name": name, "pid": pid, "tid": track_id(pid, 0), "ts": us(total),
                       "args": dict.fromkeys(columns, 0.0)})
    return events
