"""A basic Chrome trace (Perfetto, chrome://tracing): one track per core x unit.

Each instruction is one complete ("X") event; timestamps are microseconds at the card's
clock and the exact cycles are kept in ``args``. The trace-analyzer dialect is built on
this in its own module.
"""

from __future__ import annotations

import json
from typing import Any

from ..config import Machine
from ..engine.log import EventLog
from ..unit_program.opcodes import CORE_UNITS, HOST_UNIT

HOST_PID = 1000


def chrome_trace(log: EventLog, machine: Machine) -> str:
    us_per_cycle = 1.0 / (machine.clock.ghz * 1000.0)
    events: list[dict[str, Any]] = []
    used = sorted({(ins.core, ins.unit) for ins in log.instructions})
    for core, unit in used:
        pid = HOST_PID if core < 0 else core
        tid = len(CORE_UNITS) if unit == HOST_UNIT else CORE_UNITS.index(unit)
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "ts": 0,
                       "args": {"name": "host" if core < 0 else f"core{core}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "ts": 0,
                       "args": {"name": unit}})
    for i, ins in enumerate(log.instructions):
        start, end = int(log.start[i]), int(log.end[i])
        events.append({
            "ph": "X", "cat": "unit", "name": ins.op,
            "pid": HOST_PID if ins.core < 0 else ins.core,
            "tid": len(CORE_UNITS) if ins.unit == HOST_UNIT else CORE_UNITS.index(ins.unit),
            "ts": round(start * us_per_cycle, 6), "dur": round((end - start) * us_per_cycle, 6),
            "args": {"start_cycle": start, "end_cycle": end, "at": ins.path},
        })
    return json.dumps({"traceEvents": events, "displayTimeUnit": "ns",
                       "otherData": {"clock_ghz": machine.clock.ghz, "total_cycles": log.total_cycles}}) + "\n"
