"""Report: the EventLog summed up per unit class, DRAM channel and ring link; text and JSON.

Figures are integers or floats rounded to fixed digits so the JSON of a run is
byte-identical across runs and processes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..config import STICK_BYTES, Machine
from ..engine.log import CHANNEL_STATS, LINK_STATS, UNIT_STATS, EventLog
from ..unit_program.opcodes import unit_kind

UNIT_CLASSES = {"load": "dma", "store": "dma", "send": "dma", "lx2fifo": "fifo", "fifo2lx": "fifo",
                "pt": "pt", "sfu": "sfu", "pcie": "pcie"}
STALLS = {"stall_token_cycles": "waiting for a token (data not yet produced)",
          "stall_data_cycles": "waiting for data in the FIFO it reads",
          "stall_room_cycles": "waiting for room in the FIFO it writes",
          "stall_link_cycles": "sticks waiting for a ring link (stick-cycles)",
          "stall_dram_cycles": "requests waiting for DRAM beyond its latency (request-cycles)"}


@dataclass(frozen=True)
class Report:
    data: dict[str, Any]

    @property
    def total_cycles(self) -> int:
        return self.data["total_cycles"]

    def to_json(self) -> str:
        return json.dumps(self.data, indent=1) + "\n"

    def to_text(self) -> str:
        return render_text(self.data)


def _gbps(nbytes: float, cycles: int, ghz: float) -> float:
    return round(nbytes / cycles * ghz, 3) if cycles else 0.0


def build_report(log: EventLog, machine: Machine, source: str) -> Report:
    cycles, ghz = log.total_cycles, machine.clock.ghz
    data: dict[str, Any] = {
        "program": source,
        "total_cycles": cycles,
        "clock_ghz": ghz,
        "latency_us": round(cycles / ghz / 1000, 6),
        "instructions": len(log.instructions),
        "units": _unit_classes(log, cycles),
        "pt": _pt(log, machine, cycles),
        "dram": _dram(log, machine, cycles),
        "ring": _ring(log, machine, cycles),
    }
    return Report(data)


def _unit_classes(log: EventLog, cycles: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for u, name in enumerate(log.unit_names):
        cls = UNIT_CLASSES[unit_kind(name.rsplit(".", 1)[-1])]
        row = out.setdefault(cls, {"units_used": 0, **dict.fromkeys(UNIT_STATS, 0)})
        stats = log.unit_stats[u]
        if stats.any():
            row["units_used"] += 1
        for key, value in zip(UNIT_STATS, stats, strict=True):
            row[key] += int(value)
    for row in out.values():
        row["busy_share"] = round(row["busy_cycles"] / (cycles * row["units_used"]), 6) \
            if cycles and row["units_used"] else 0.0
    return out


def _pt(log: EventLog, machine: Machine, cycles: int) -> dict[str, Any]:
    passes = [ins for ins in log.instructions if ins.op == "matmul"]
    macs = sum(ins.args["rows"] * ins.args["k"] * ins.args.get("cols", machine.pt.cols_per_pass) for ins in passes)
    arrays = {(ins.core, ins.unit) for ins in passes}
    peak = sum(machine.pt.macs_per_cycle(ins.args.get("dtype", "fp16")) for ins in passes) / max(len(passes), 1)
    return {"passes": len(passes), "macs": macs, "arrays_used": len(arrays),
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


def _ring(log: EventLog, machine: Machine, cycles: int) -> dict[str, Any]:
    stops, links = machine.ring.stops, []
    for lk, row in enumerate(log.link_stats):
        stats = dict(zip(LINK_STATS, (int(v) for v in row), strict=True))
        if not stats["sticks"]:
            continue
        stop, direction = divmod(lk, 2)
        nxt = stops[(stop + (1 if direction == 0 else -1)) % len(stops)]
        links.append({"link": f"{stops[stop]}->{nxt}", "sticks": stats["sticks"],
                      "gb_per_s": _gbps(stats["sticks"] * STICK_BYTES, cycles, machine.clock.ghz),
                      "busy_share": round(stats["sticks"] / cycles, 6) if cycles else 0.0,
                      "wait_cycles": stats["wait_cycles"]})
    busiest = max(links, key=lambda x: x["sticks"])["link"] if links else None
    return {"stick_hops": int(np.sum(log.link_stats[:, 0])), "busiest_link": busiest, "links": links}


def render_text(d: dict[str, Any]) -> str:
    lines = [f"{d['program']}: {d['total_cycles']} cycles = {d['latency_us']:.3f} us at {d['clock_ghz']} GHz "
             f"({d['instructions']} instructions)", "",
             f"{'unit':<6}{'used':>6}{'busy cycles':>14}{'busy %':>8}  stalls"]
    for cls, row in d["units"].items():
        if not row["units_used"]:
            continue
        stalls = ", ".join(f"{k[6:-7]} {row[k]}" for k in STALLS if row[k]) or "none"
        lines.append(f"{cls:<6}{row['units_used']:>6}{row['busy_cycles']:>14}{100 * row['busy_share']:>7.1f}%  "
                     f"{stalls}")
    lines.append("  stalls: " + "; ".join(f"{k[6:-7]} = {why}" for k, why in STALLS.items()))
    pt = d["pt"]
    if pt["passes"]:
        lines.append(f"PT: {pt['passes']} passes, {pt['macs']} MACs on {pt['arrays_used']} arrays, "
                     f"{100 * pt['mac_utilization']:.1f}% of their peak")
    dram = d["dram"]
    lines += ["", f"DRAM: read {dram['read_bytes']} B, write {dram['write_bytes']} B, "
              f"{dram['gb_per_s']:.1f} GB/s of {dram['peak_gb_per_s']:.1f} peak"]
    for ch in dram["channels"]:
        if ch["read_bytes"] or ch["write_bytes"]:
            lines.append(f"  ch{ch['channel']:<3}{ch['gb_per_s']:>8.2f} GB/s  hits {ch['row_hits']} "
                         f"misses {ch['row_misses']} conflicts {ch['row_conflicts']} "
                         f"turnarounds {ch['turnarounds']} refreshes {ch['refreshes']}")
    ring = d["ring"]
    lines += ["", f"Ring: {ring['stick_hops']} stick-hops, busiest link {ring['busiest_link']}"]
    for link in sorted(ring["links"], key=lambda x: -x["sticks"])[:8]:
        lines.append(f"  {link['link']:<16}{link['gb_per_s']:>8.2f} GB/s  busy {100 * link['busy_share']:.1f}%  "
                     f"wait {link['wait_cycles']} cycles")
    return "\n".join(lines) + "\n"
