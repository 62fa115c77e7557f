"""The dialect of IBM's trace analyzer (aiu-trace-analyzer, command ``acelyzer``): the card's kernel
stream, the host events that enclose it, and the ideal_cycles.json files it reads PT utilization from.

Rules, found by running the analyzer (DESIGN.md section 4): the trace has top-level
``deviceProperties`` (its TORCH dialect); each kernel is one complete event with ``cat: "kernel"``,
a name ending in " Cmpt Exec" and ``args.TS1..TS5``, decimal strings of 32-bit counters of the SoC
clock at the starts of the DMA-in, prep and compute phases and the ends of the compute and DMA-out
phases; kernels that overlap in time need distinct ``args.stream``; a host ``aiuScheduleWait``
event with the same ``args.correlation`` encloses its kernels.

The analyzer reads a Cmpt Exec event as the compute phase, TS3..TS4 (it estimates the clock from
the two), so the event spans that; the DMA phases are "phase" events on a track beside the
kernel's stream. The model has no prep phase (TS2 = TS3). The whole program is one launch, one
correlation. ``acelyzer -c DIR`` reads DIR/inductor-spyre/<kernel>/perf/ideal_cycles.json
and reports PT utilization as ideal time over Cmpt Exec time: with the PT ideal cycles written
here it equals the report's ``pt_utilization``.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any

from ..config import Machine
from ..kernel_program.ops import OPS
from .chrome import complete_event, lanes, metadata, microseconds, track_id

CARD_PID, HOST_PID = 0, 1
LAUNCH_TID = track_id(HOST_PID, 0)  # the host's first track: the launch that waits for the program
CORRELATION = 1  # the program is one launch: the analyzer fingerprints a launch's kernels together
PHASES_TID = 100  # + stream: a kernel's DMA phases, on their own track (the analyzer re-times Cmpt Exec
                  # from TS3 and TS4, to the SoC clock's nanosecond, so it may not meet them exactly)
SOC_GHZ = Fraction(1)  # the SoC clock the TS counters count; acelyzer's default --freq is 1000:1100 (MHz)
WRAP = 1 << 32
EXEC_SUFFIX = " Cmpt Exec"


def trace_name(kernel: str) -> str:
    """The kernel's name in the trace and its ideal_cycles folder: safe as a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", kernel) or "_"


def device_properties(machine: Machine) -> list[dict[str, Any]]:
    return [{"id": 0, "name": "IBM Spyre (spyre-emu model)", "cores": machine.cores.count,
             "clock_mhz": round(machine.clock.ghz * 1000, 6), "soc_clock_mhz": int(SOC_GHZ * 1000),
             "totalGlobalMem": machine.dram.size_bytes}]


def streams(kernels: list[dict[str, Any]]) -> list[int]:
    """A stream (1, 2, ...) per kernel so that kernels of one stream never overlap (kernels come sorted
    by start)."""
    return [lane + 1 for lane in lanes([(k["start_cycle"], k["end_cycle"]) for k in kernels])]


def kernel_events(kernels: list[dict[str, Any]], machine: Machine, total_cycles: int) -> list[dict[str, Any]]:
    """The host's wait for the program; per kernel its Cmpt Exec event and its DMA phases, on its stream."""
    soc_per_core = SOC_GHZ / Fraction(repr(machine.clock.ghz))  # exact: 10/11 for 1.1 GHz
    us = microseconds(machine)
    assigned = streams(kernels)
    events = [metadata(HOST_PID, "thread_name", "launch", LAUNCH_TID),
              complete_event(HOST_PID, LAUNCH_TID, "aiuScheduleWait", "cuda_runtime", 0, total_cycles, us,
                             {"correlation": CORRELATION})]
    for s in sorted(set(assigned)):
        events += [metadata(CARD_PID, "thread_name", f"stream {s}", s),
                   metadata(CARD_PID, "thread_name", f"stream {s} DMA phases", PHASES_TID + s)]
    for k, stream in zip(kernels, assigned, strict=True):
        name = trace_name(k["name"])
        marks = (k["start_cycle"], k["exec_start_cycle"], k["exec_start_cycle"], k["exec_end_cycle"], k["end_cycle"])
        counters = {f"TS{n}": str(int(cycle * soc_per_core) % WRAP) for n, cycle in enumerate(marks, 1)}
        execute = complete_event(CARD_PID, stream, name + EXEC_SUFFIX, "kernel", marks[2], marks[3], us, {
            "correlation": CORRELATION, "stream": stream, **counters, "start_cycle": marks[0], "end_cycle": marks[4],
            "op": k["op"], "pt_utilization": k["pt_utilization"], "ideal_cycles": k["ideal_cycles"]})
        # The analyzer moves the event back to TS1 by float arithmetic on ts + dur: an end a rounding
        # error early puts a kernel that starts at cycle 0 just before 0, which it refuses.
        execute["dur"] = _reaching(execute["ts"], execute["dur"], us(marks[3]))
        events.append(execute)
        for phase, start, end in (("DMA in", marks[0], marks[2]), ("DMA out", marks[3], marks[4])):
            if end > start:
                events.append(complete_event(CARD_PID, PHASES_TID + stream, f"{name} {phase}", "phase", start, end, us,
                                             {"start_cycle": start, "end_cycle": end}))
    return events


def _reaching(ts: float, dur: float, end: float) -> float:
    """The smallest float ``d >= dur`` with ``ts + d >= end`` in float arithmetic: the first of the
    floats above ``dur``, in order, that reaches ``end``, found by doubling then bisection (stepping
    one float at a time takes millions of steps when ``ts`` is large and ``dur`` small)."""
    if ts + dur >= end:
        return dur
    lo, step = dur, math.ulp(dur)
    while ts + (dur + step) < end:
        lo, step = dur + step, step * 2
    hi = dur + step
    while (mid := (lo + hi) / 2) not in (lo, hi):
        lo, hi = (lo, mid) if ts + mid >= end else (mid, hi)
    return hi


def ideal_cycles_files(kernels: list[dict[str, Any]]) -> dict[str, bytes]:
    """inductor-spyre/<kernel>/perf/ideal_cycles.json per kernel: its PT ideal cycles and a category
    (the op's lowering family, as acelyzer groups kernels by it)."""
    out = {}
    for k in kernels:
        category = OPS[k["op"]].family if k["op"] in OPS else "program"
        entry = [{"ideal_cycles": k["ideal_cycles_by"]["pt"], "op_category": category}]
        out[f"inductor-spyre/{trace_name(k['name'])}/perf/ideal_cycles.json"] = (json.dumps(entry) + "\n").encode()
    return out
