"""Per-kernel figures: span and phases, per-unit busy/stalled/idle cycles, work, bytes, roofline.

A kernel is the set of instructions lowered from one kernel-program kernel (``Instruction.kernel``);
a hand-written unit program is one kernel named after its file. Its span runs from its first
instruction's start to its last one's end. Its compute phase runs from the first start to the last
end of its compute instructions (PT, SFU and the FIFO movers that feed them), or is the whole span
when it has none: before it is the DMA-in phase, after it the DMA-out phase (the trace's TS1..TS5).

Within the span, every unit that runs one of the kernel's instructions is, each cycle, exactly one of:
busy (running one of them; a DMA unit's queued instructions overlap, so from the later of its start
and the previous end), stalled (its next instruction is one of the kernel's and waits for a
token; or a running one waits for FIFO data or room), or idle (anything else, including running
another kernel's instructions). So busy + stalled + idle = span for every unit.

Ideal cycles are work divided by the peak of the cores the kernel uses: PT MACs (each pass at its
dtype's rate), SFU stick-cycles, DRAM bytes; ``ideal_cycles`` is the largest of the three. PT and
SFU utilization are their ideal cycles over the compute phase, as IBM's trace analyzer computes PT
utilization from ideal_cycles.json and the Cmpt Exec (TS3..TS4) duration.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from functools import reduce
from itertools import count
from operator import add
from typing import Any

import numpy as np

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..engine.log import EventLog
from ..engine.pack import sfu_stick_cycles
from ..unit_program.model import Instruction, matmul_repeat
from ..unit_program.opcodes import SFU_OPS, unit_kind
from .distinct import Distinct
from .traffic import Traffic

COMPUTE_KINDS = {"lx2fifo", "fifo2lx", "pt", "sfu"}
STALL_CAUSES = ("token", "data", "room")


@dataclass(frozen=True)
class Units:
    """Each instruction's unit: ``of[i]`` indexes ``names`` ("core3.load"; host units by their own name),
    numbered in the order the instructions first use them."""

    of: np.ndarray
    names: list[str]


def units_of(log: EventLog, kinds: Distinct) -> Units:
    index: dict[tuple[int, str], int] = {}
    of = np.array([index.setdefault((ins.core, ins.unit), len(index)) for ins in kinds.first], np.int64)
    return Units(of[kinds.which], [unit if core < 0 else f"core{core}.{unit}" for core, unit in index])


def kernel_figures(log: EventLog, machine: Machine, traffic: Traffic, units: Units, default_name: str,
                   ops: dict[str, str], kinds: Distinct) -> list[dict[str, Any]]:
    """One dict per kernel, ordered by start cycle (then end, then name)."""
    number: defaultdict[str, int] = defaultdict(count().__next__)  # kernels in order of first use
    of = np.array([number[ins.kernel or default_name] for ins in log.instructions], np.int64)
    order = np.argsort(of, kind="stable")  # each kernel's instructions in program order
    bounds = np.searchsorted(of[order], np.arange(len(number) + 1))
    waits = previous_end(log, units)
    ring = traffic.ring_sticks(len(log.instructions))
    per = _per_instruction(kinds, machine)
    kernels = [_kernel(name, order[bounds[k]:bounds[k + 1]], log, machine, traffic, ring, waits, units,
                       ops.get(name, ""), per) for k, name in enumerate(number)]
    return sorted(kernels, key=lambda k: (k["start_cycle"], k["end_cycle"], k["name"]))


def previous_end(log: EventLog, units: Units) -> np.ndarray:
    """Per instruction, the cycle its unit became free for it: the end of the unit's previous
    instruction, or 0. Until its start it waited for tokens (a unit starts its next instruction
    in the cycle the previous one ends when its tokens are there). The log lists the instructions
    stream by stream, in program order."""
    out = np.zeros(len(log.instructions), np.int64)
    same = units.of[1:] == units.of[:-1]
    out[1:][same] = log.end[:-1][same]
    return out


@dataclass(frozen=True)
class _PerInstruction:
    """Per instruction: its core, whether its unit computes, and its four terms of ``_work``."""

    core: np.ndarray
    compute: np.ndarray
    work: np.ndarray  # objects, [instructions, 4]: Python numbers, summed in order as one loop would


def _per_instruction(kinds: Distinct, machine: Machine) -> _PerInstruction:
    first, which = kinds.first, kinds.which
    core = np.array([ins.core for ins in first], np.int64)
    computes = {unit: unit_kind(unit) in COMPUTE_KINDS for unit in {ins.unit for ins in first}}  # per name, once
    compute = np.array([computes[ins.unit] for ins in first], bool)
    work = np.empty((len(first), 4), object)
    work[:] = [_terms(ins, machine) for ins in first] or np.empty((0, 4), object)
    return _PerInstruction(core[which], compute[which], work[which])


def _kernel(name: str, idx: np.ndarray, log: EventLog, machine: Machine, traffic: Traffic, ring: np.ndarray,
            waits: np.ndarray, units: Units, op: str, per: _PerInstruction) -> dict[str, Any]:
    start, end = int(log.start[idx].min()), int(log.end[idx].max())
    span, ghz = end - start, machine.clock.ghz
    cores = [int(c) for c in np.unique(per.core[idx]) if c >= 0]
    compute = idx[per.compute[idx]]
    exec_start = int(log.start[compute].min()) if compute.size else start
    exec_end = int(log.end[compute].max()) if compute.size else end
    per_unit = _per_unit(idx, log, waits, units, start, end)
    work = _work(per.work[idx])
    moved = {"dram_read": int(traffic.dram_read[idx].sum()), "dram_write": int(traffic.dram_write[idx].sum()),
             "ring": int(ring[idx].sum()) * STICK_BYTES, "lx": int(traffic.lx[idx].sum())}
    ideal = _ideal(work, moved, machine, len(cores))
    exec_cycles = exec_end - exec_start
    return {
        "name": name, "op": op, "start_cycle": start, "end_cycle": end, "cycles": span,
        "us": round(span / ghz / 1000, 6), "instructions": len(idx),
        "exec_start_cycle": exec_start, "exec_end_cycle": exec_end, "cores": cores,
        "units": _by_kind(per_unit), "per_unit": per_unit,
        "pt_utilization": _share(ideal["pt"], exec_cycles), "sfu_utilization": _share(ideal["sfu"], exec_cycles),
        "macs": work["macs"], "bytes": moved,
        "dram_gb_per_s": _gbps(moved["dram_read"] + moved["dram_write"], span, ghz),
        "ring_gb_per_s": _gbps(moved["ring"], span, ghz),
        "ideal_cycles": max(ideal.values()), "ideal_cycles_by": ideal,
        "roofline": _roofline(work, moved, span, machine, len(cores)),
    }


def _per_unit(idx: np.ndarray, log: EventLog, waits: np.ndarray, units: Units, start: int, end: int
              ) -> list[dict[str, Any]]:
    """busy / stalled by cause / idle cycles of every unit the kernel uses, within its span."""
    zeros = np.zeros(len(idx), np.int64)
    data = zeros if log.stall_data is None else log.stall_data[idx]
    room = zeros if log.stall_room is None else log.stall_room[idx]
    began, ended, free = log.start[idx], log.end[idx], waits[idx]
    token = np.maximum(0, began - np.maximum(free, start))
    busy = np.maximum(0, ended - np.maximum(began, free)) - data - room  # a DMA unit's queued instructions overlap
    used, which = np.unique(units.of[idx], return_inverse=True)
    sums = np.zeros((4, len(used)), np.int64)
    for row, values in enumerate((busy, token, data, room)):
        np.add.at(sums[row], which, values)
    rows = [{"unit": units.names[u], "busy_cycles": int(b),
             "stall_cycles": {"token": int(t), "data": int(d), "room": int(r)},
             "idle_cycles": end - start - int(b + t + d + r)} for u, b, t, d, r in zip(used, *sums, strict=True)]
    return sorted(rows, key=lambda row: _unit_order(row["unit"]))


def _unit_order(unit: str) -> tuple[int, str]:
    core, _, name = unit.partition(".")
    return (int(core[4:]), name) if name else (1 << 30, unit)


def _by_kind(per_unit: list[dict[str, Any]]) -> dict[str, Any]:
    """Per unit kind (load, pt, sfu, ...): sums over its units; busy + stalls + idle = span x units_used."""
    out: dict[str, Any] = {}
    for row in per_unit:
        kind = unit_kind(row["unit"].rsplit(".", 1)[-1])
        agg = out.setdefault(kind, {"units_used": 0, "busy_cycles": 0, "stall_cycles": dict.fromkeys(STALL_CAUSES, 0),
                                    "idle_cycles": 0})
        agg["units_used"] += 1
        agg["busy_cycles"] += row["busy_cycles"]
        agg["idle_cycles"] += row["idle_cycles"]
        for cause, cycles in row["stall_cycles"].items():
            agg["stall_cycles"][cause] += cycles
    return dict(sorted(out.items()))


def _terms(ins: Instruction, machine: Machine) -> tuple[int, float, int, int]:
    """An instruction's PT MACs and their cycles at peak on one array, its SFU stick-cycles and elements."""
    a = ins.args
    if ins.op == "matmul":
        n = matmul_repeat(a) * int(a["rows"]) * int(a["k"]) * int(a.get("cols", machine.pt.cols_per_pass))
        return n, n / machine.pt.macs_per_cycle(str(a.get("dtype", "fp16"))), 0, 0
    if ins.op in SFU_OPS:
        sticks, out = int(a["sticks"]), str(a.get("out_dtype", a.get("dtype", "fp16")))
        return 0, 0.0, sticks * sfu_stick_cycles(machine, ins.op), sticks * (STICK_BYTES // DTYPE_BYTES[out])
    return 0, 0.0, 0, 0


def _work(terms: np.ndarray) -> dict[str, Any]:
    """The sums of ``_terms`` over a kernel's instructions, in program order (the float sum as a loop adds it;
    a zero term leaves a sum of non-negative numbers unchanged)."""
    macs, pt_cycles, sfu_cycles, elements = (reduce(add, terms[:, i], zero) for i, zero in enumerate((0, 0.0, 0, 0)))
    return {"macs": macs, "pt_cycles": pt_cycles, "sfu_cycles": sfu_cycles, "sfu_elements": elements}


def _ideal(work: dict[str, Any], moved: dict[str, int], machine: Machine, cores: int) -> dict[str, int]:
    corelets = max(cores, 1) * machine.cores.corelets
    dram = moved["dram_read"] + moved["dram_write"]
    return {"pt": int(np.ceil(work["pt_cycles"] / corelets)), "sfu": -(-work["sfu_cycles"] // corelets),
            "dram": int(np.ceil(dram / machine.dram.peak_bytes_per_cycle()))}


def peak_flops_per_cycle(machine: Machine, cores: int) -> int:
    """fp16 PT peak of ``cores`` cores, two flops per MAC: the roofline's flat roof."""
    return 2 * machine.pt.macs_per_cycle("fp16") * machine.cores.corelets * cores


def _roofline(work: dict[str, Any], moved: dict[str, int], span: int, machine: Machine,
              cores: int) -> dict[str, Any]:
    """Flops (2 per MAC, 1 per SFU element) over DRAM bytes; compute-bound at or right of the ridge."""
    flops = 2 * work["macs"] + work["sfu_elements"]
    nbytes = moved["dram_read"] + moved["dram_write"]
    intensity = flops / nbytes if nbytes else None
    ridge = peak_flops_per_cycle(machine, max(cores, 1)) / machine.dram.peak_bytes_per_cycle()
    return {"flops": flops, "bytes": nbytes, "intensity": None if intensity is None else round(intensity, 6),
            "attained_flops_per_cycle": round(flops / span, 6) if span else 0.0,
            "peak_flops_per_cycle": peak_flops_per_cycle(machine, max(cores, 1)),
            "bound": "compute" if intensity is None or intensity >= ridge else "memory"}


def _share(part: float, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0


def _gbps(nbytes: int, cycles: int, ghz: float) -> float:
    return round(nbytes / cycles * ghz, 3) if cycles else 0.0
