"""The timeline: one Chrome Trace Event JSON that IBM's trace analyzer and Perfetto both read.

Processes, top to bottom: the card's kernel streams and its counters (DRAM GB/s, ring occupancy, PT
busy); the host, whose events enclose the kernels (acelyzer.py owns that dialect) and which runs the
PCIe transfers; the ring, one counter track per link with traffic, grouped by direction; then one
process per core with a track per unit, each instruction a complete event of category "unit".
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
from .chrome import complete_event, metadata, microseconds

RING_PID, CORE_PID = 2, 100
DIRECTIONS = ("clockwise", "counter-clockwise")


def chrome_trace(log: EventLog, machine: Machine, report: dict[str, Any]) -> str:
    events = _processes(log) + kernel_events(report["kernels"], machine, log.total_cycles)
    events += _counters(report, machine) + _units(log, machine)
    return json.dumps({"traceEvents": events, "deviceProperties": device_properties(machine),
                       "displayTimeUnit": "ns",
                       "otherData": {"program": report["program"], "clock_ghz": machine.clock.ghz,
                                     "total_cycles": log.total_cycles}}) + "\n"


def _processes(log: EventLog) -> list[dict[str, Any]]:
    cores = sorted({ins.core for ins in log.instructions if ins.core >= 0})
    named = [(CARD_PID, "spyre card"), (HOST_PID, "host"), (RING_PID, "ring")]
    named += [(CORE_PID + c, f"core{c}") for c in cores]
    events = []
    for rank, (pid, name) in enumerate(named):
        events += [metadata(pid, "process_name", name), metadata(pid, "process_sort_index", rank)]
    for core, unit in sorted({(ins.core, ins.unit) for ins in log.instructions}):
        pid, tid = _track(core, unit)
        events.append(metadata(pid, "thread_name", unit, tid))
    return events


def _track(core: int, unit: str) -> tuple[int, int]:
    """(pid, tid) of a unit's track; the host's PCIe unit sits below the host's streams."""
    if unit == HOST_UNIT:
        return HOST_PID, 1000
    return CORE_PID + core, CORE_UNITS.index(unit)


def _units(log: EventLog, machine: Machine) -> list[dict[str, Any]]:
    us = microseconds(machine)
    events = []
    for i, ins in enumerate(log.instructions):
        start, end = int(log.start[i]), int(log.end[i])
        pid, tid = _track(ins.core, ins.unit)
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
                events.append({"ph": "C", "name": name, "pid": pid, "ts": us(b * width), "args": values})
                previous = values
        events.append({"ph": "C", "name": name, "pid": pid, "ts": us(total), "args": dict.fromkeys(columns, 0.0)})
    return events
