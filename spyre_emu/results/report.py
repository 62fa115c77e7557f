"""Report: the EventLog summed up for the program (per unit class, DRAM channel, ring link), per
kernel (kernels.py) and over time (activity.py); as JSON and as text (text.py).

Figures are integers or floats rounded to fixed digits so the JSON of a run is byte-identical
across runs and processes. docs/reports.md describes every key.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..config import STICK_BYTES, Machine
from ..engine.log import CHANNEL_STATS, LINK_STATS, UNIT_STATS, EventLog
from ..unit_program.model import matmul_repeat
from ..unit_program.opcodes import unit_kind
from .activity import activity
from .distinct import Distinct, distinct
from .kernels import kernel_figures, peak_flops_per_cycle, units_of
from .text import render_text
from .traffic import trace_traffic

FORMAT, VERSION = "spyre-emu.report", 1
_NUMBER_LIST = re.compile(r"\[\s*(-?[\d.e+-]+(?:,\s*-?[\d.e+-]+)*)\s*\]")

UNIT_CLASSES = {"load": "dma", "store": "dma", "send": "dma", "lx2fifo": "fifo", "fifo2lx": "fifo",
                "pt": "pt", "sfu": "sfu", "pcie": "pcie"}


@dataclass(frozen=True)
class Report:
    data: dict[str, Any]

    @property
    def total_cycles(self) -> int:
        return self.data["total_cycles"]

    def to_json(self) -> str:
        """Indented, with each list of numbers on one line (activity bins stay readable)."""
        text = json.dumps(self.data, indent=1)
        return _NUMBER_LIST.sub(lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text) + "\n"

    def to_text(self) -> str:
        return render_text(self.data)


def _gbps(nbytes: float, cycles: int, ghz: float) -> float:
    return round(nbytes / cycles * ghz, 3) if cycles else 0.0


def build_report(log: EventLog, machine: Machine, source: str, kernel_ops: dict[str, str] | None = None) -> Report:
    """``kernel_ops``: the op of each kernel of a kernel program, by name. The program's time is its
    launch (``launch_cycles``) and then the card running it (``card_cycles``, first instruction to last);
    rates and shares are over the card's cycles."""
    cycles, ghz = log.total_cycles, machine.clock.ghz
    launch = launch_cycles(log, machine)
    total = launch + cycles
    kinds = distinct(log.instructions)
    traffic = trace_traffic(log, machine, kinds)
    links = _link_names(log, machine)
    units = units_of(log, kinds)
    data: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "program": source,
        "total_cycles": total,
        "clock_ghz": ghz,
        "latency_us": round(total / ghz / 1000, 6),
        "launch_cycles": launch,
        "card_cycles": cycles,
        "instructions": len(log.instructions),
        "units": _unit_classes(log, cycles),
        "pt": _pt(kinds, machine, cycles),
        "dram": _dram(log, machine, cycles),
        "ring": _ring(log, machine, cycles, links),
        "machine": {"cores": machine.cores.count,
                    "peak_flops_per_cycle": peak_flops_per_cycle(machine, machine.cores.count),
                    "peak_dram_bytes_per_cycle": round(machine.dram.peak_bytes_per_cycle(), 6),
                    "link_bytes_per_cycle": machine.ring.link_bytes_per_cycle},
        "kernels": kernel_figures(log, machine, traffic, units, Path(source).stem, kernel_ops or {}, kinds),
        "activity": activity(log, machine, traffic, units, links),
    }
    return Report(data)


def launch_cycles(log: EventLog, machine: Machine) -> int:
    """The dispatch, and for an on-chip relayout (nothing but LX-to-LX sends) the setup of its moves."""
    relayout = bool(log.instructions) and all(ins.op == "send" for ins in log.instructions)
    return machine.launch.dispatch_cycles + (machine.launch.relayout_setup_cycles if relayout else 0)


def _link_names(log: EventLog, machine: Machine) -> dict[int, str]:
    """Links that carried sticks: index -> "core1->core0" (stop names)."""
    stops = machine.ring.stops
    names = {}
    for lk in np.flatnonzero(log.link_stats[:, 0]):
        stop, direction = divmod(int(lk), 2)
        names[int(lk)] = f"{stops[stop]}->{stops[(stop + (1 if direction == 0 else -1)) % len(stops)]}"
    return names


def _unit_classes(log: EventLog, cycles: int) -> dict[str, Any]:
    """Per unit class, in the order the units list them: units that did anything, summed counters, busy share."""
    classes = [UNIT_CLASSES[unit_kind(name.rsplit(".", 1)[-1])] for name in log.unit_names]
    out: dict[str, Any] = {}
    for cls in dict.fromkeys(classes):
        stats = log.unit_stats[[c == cls for c in classes]]
        used = int(stats.any(axis=1).sum())
        row = out[cls] = {"units_used": used, **dict(zip(UNIT_STATS, stats.sum(axis=0).tolist(), strict=True))}
        row["busy_share"] = round(row["busy_cycles"] / (cycles * used), 6) if cycles and used else 0.0
    return out


def _pt(kinds: Distinct, machine: Machine, cycles: int) -> dict[str, Any]:
    """Passes, MACs, arrays used and MAC utilization: summed per distinct matmul times its count (exact integers)."""
    counts = np.bincount(kinds.which, minlength=len(kinds.first)).tolist()
    matmuls = [(n, ins) for n, ins in zip(counts, kinds.first, strict=True) if ins.op == "matmul"]
    repeats = [n * matmul_repeat(ins.args) for n, ins in matmuls]
    macs = sum(n * ins.args["rows"] * ins.args["k"] * ins.args.get("cols", machine.pt.cols_per_pass)
               for n, (_, ins) in zip(repeats, matmuls, strict=True))
    arrays = {(ins.core, ins.unit) for _, ins in matmuls}
    peak = sum(n * machine.pt.macs_per_cycle(ins.args.get("dtype", "fp16"))
               for n, (_, ins) in zip(repeats, matmuls, strict=True)) / max(sum(repeats), 1)
    return {"passes": sum(repeats), "macs": macs, "arrays_used": len(arrays),
            "mac_utilization": round(macs / (cycles * peak * len(arrays)), 6) if arrays and cycles else 0.0}


def _dram(log: EventLog, machine: Machine, cycles: int) -> dict[str, Any]:
    ghz, chans = machine.clock.ghz, []
    for c, row in enumerate(log.channel_stats):
        stats = dict(zip(CHANNEL_STATS, (int(v) for v in row), strict=True))
        moved = (stats["read_sticks"] + stats["write_sticks"]) * STICK_BYTES
        chans.append({"channel": c, "read_bytes": stats["read_sticks"] * STICK_BYTES,
                      "write_bytes": stats["write_sticks"] * STICK_BYTES, "gb_per_s": _gbps(moved, cycles, ghz),
                      **{k: v for k, v in stats.items() if not k.endswith("_sticks")}})
    read = sum(ch["read_bytes"] for ch in chans)
    write = sum(ch["write_bytes"] for ch in chans)
    return {"read_bytes": read, "write_bytes": write, "gb_per_s": _gbps(read + write, cycles, ghz),
            "peak_gb_per_s": round(machine.dram.peak_bytes_per_cycle() * ghz, 3), "channels": chans}


def _ring(log: EventLog, machine: Machine, cycles: int, names: dict[int, str]) -> dict[str, Any]:
    links = []
    for lk, name in names.items():
        stats = dict(zip(LINK_STATS, (int(v) for v in log.link_stats[lk]), strict=True))
        links.append({"link": name, "sticks": stats["sticks"],
                      "gb_per_s": _gbps(stats["sticks"] * STICK_BYTES, cycles, machine.clock.ghz),
                      "busy_share": round(stats["sticks"] / cycles, 6) if cycles else 0.0,
                      "wait_cycles": stats["wait_cycles"]})
    busiest = max(links, key=lambda x: x["sticks"])["link"] if links else None
    return {"stick_hops": int(np.sum(log.link_stats[:, 0])), "busiest_link": busiest, "links": links}
