"""What a compiled call cost: latency, a row per kernel, host steps and round trips, totals.

A call's latency is the sum of its kernel programs' simulated cycles, of the PCIe round trips its
host steps need (layout.crossings) and of its CPU fallbacks' time on the host CPU, priced by
configs/host.toml's ``[cpu]`` (FLOPs and bytes at its rates, plus a dispatch per op). Each fallback
is listed with its FLOPs, bytes, priced time and, when the call ran it (CPU tensors), the wall time
it took on this machine; the first line says what share of the graph's FLOPs ran on the simulated
card. ``last_report()`` returns the report of the latest call; ``capture()`` collects the reports of
the calls inside a ``with`` block.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from spyre_emu.config import Machine
from spyre_emu.engine import EventLog
from spyre_emu.host.config import Cpu
from spyre_emu.pipeline import RunResult

from .graph import Node, source_line
from .program import Segment

_LAST: list[FrontendReport] = []
_CAPTURES: list[list[FrontendReport]] = []


@dataclass
class FrontendReport:
    """``total_cycles``: the card's and PCIe's; ``cpu_us``: the CPU fallbacks' priced time; ``latency_us``:
    both. ``kernels``: name, op, cores, cycles (what the kernel adds to the program's end, the first of
    a program also its launch; kernels overlap), span_cycles (first start to last end), end, share (of
    ``total_cycles``), pt_utilization and sfu_utilization (over the span), dram_bytes. ``fallbacks``:
    op, reason, source, flops, bytes, cpu_us (priced), measured_us (this machine's wall time, or None).
    ``transfers``: the step's own copies (per-call inputs in, results out: direction, tensor, bytes, index);
    ``copy_us``: their time over the card's PCIe link one after another, each as the host model prices a
    copy (``Machine.pcie_us``; the drawer adds its switch). ``latency_us`` leaves them out (what the
    card and the host CPU spend on the graph's work); ``step_us`` adds them."""

    total_cycles: int
    latency_us: float
    kernels: list[dict[str, Any]]
    fallbacks: list[dict[str, Any]]
    host_steps: list[dict[str, Any]]
    crossings: list[dict[str, Any]]
    card_flop_share: float = 1.0   # the share of the graph's FLOPs the card ran (the rest: CPU fallbacks)
    cpu_us: float = 0.0            # the CPU fallbacks' priced time, part of latency_us
    programs: list[dict[str, Any]] = field(default_factory=list)   # each kernel program's own report
    kernel_programs: list[dict[str, Any]] = field(default_factory=list)  # what ran: the kernel programs
    program_inputs: list[dict[str, np.ndarray]] = field(default_factory=list)  # their inputs (functional calls)
    drawer: dict[str, Any] | None = None   # with options["cards"]: the step on the drawer (drawer.py)
    transfers: list[dict[str, Any]] = field(default_factory=list)  # the step's own copies (transfers.py)
    copy_us: float = 0.0           # their PCIe time, not in latency_us

    @property
    def step_us(self) -> float:
        """The step with its own copies: ``latency_us + copy_us``."""
        return round(self.latency_us + self.copy_us, 6)

    @property
    def fallback_count(self) -> int:
        return len(self.fallbacks)

    def to_text(self) -> str:
        lines = [f"spyre_emu: {self.card_flop_share:.1%} of the FLOPs on the card; {self.latency_us:.3f} us = "
                 f"{self.total_cycles} cycles on the card and PCIe + {self.cpu_us:.3f} us on the CPU; "
                 f"{len(self.kernels)} kernels, {self.fallback_count} CPU fallbacks, "
                 f"{len(self.crossings)} PCIe round trips",
                 f"step: {self.step_us:.3f} us with its {len(self.transfers)} own copies in and out "
                 f"({self.copy_us:.3f} us over PCIe, not in the latency above)",
                 "",
                 f"{'kernel':<24}{'op':<14}{'cores':>6}{'cycles':>12}{'share':>8}{'PT':>7}{'SFU':>7}{'DRAM B':>14}"]
        for k in self.kernels:
            lines.append(f"{k['name']:<24}{k['op']:<14}{k['cores']:>6}{k['cycles']:>12}{k['share']:>8.1%}"
                         f"{k['pt_utilization']:>7.1%}{k['sfu_utilization']:>7.1%}{k['dram_bytes']:>14}")
        for f in self.fallbacks:
            here = f", {f['measured_us']:.1f} us on this machine" if f["measured_us"] is not None else ""
            lines.append(f"fallback {f['op']} ({f['reason']}; {f['flops']} FLOPs, {f['bytes']} B: "
                         f"{f['cpu_us']:.3f} us{here}) at {f['source']}")
        for c in self.crossings:
            lines.append(f"round trip {c['direction']} {c['tensor']}: {c['bytes']} B, {c['cycles']} cycles")
        if self.drawer:
            d = self.drawer
            lines.append(f"drawer: {d['cards']} cards, {d['step_us']:.1f} us a step (host model, programs built "
                         f"before); per card {d['card_us']:.1f} us of kernels, {d['launches']} launches; "
                         f"{d['collectives']} collectives {d['collective_us']:.1f} us")
        return "\n".join(lines) + "\n"


def last_report() -> FrontendReport | None:
    """The report of the latest call of a model compiled with backend="spyre_emu"."""
    return _LAST[-1] if _LAST else None


@contextlib.contextmanager
def capture() -> Iterator[list[FrontendReport]]:
    """``with capture() as reports:`` collects the report of every call made inside the block."""
    reports: list[FrontendReport] = []
    _CAPTURES.append(reports)
    try:
        yield reports
    finally:
        _CAPTURES.remove(reports)


def publish(report: FrontendReport) -> None:
    _LAST[:] = [report]
    for reports in _CAPTURES:
        reports.append(report)


def build(segments: list[tuple[Segment, RunResult]], host: list[Node], crossings: list[tuple[str, str, int]],
          machine: Machine, cpu: Cpu, inputs: list[dict[str, np.ndarray]], host_us: dict[int, float]
          ) -> FrontendReport:
    """``host_us``: the wall time of each host step (by ``id``) this call ran on the CPU, if it ran them."""
    trips = [{"direction": d, "tensor": name, "bytes": nbytes, "cycles": pcie_cycles(nbytes, machine)}
             for d, name, nbytes in crossings]
    shapes: dict[int, list[dict[str, Any]]] = {}
    kernels = [row for seg, result in segments
               for row in _kernel_rows(seg, result.log, result.report.data["launch_cycles"], shapes)]
    total = sum(r.report.total_cycles for _, r in segments) + sum(t["cycles"] for t in trips)
    for row in kernels:
        row["share"] = round(row["cycles"] / total, 6) if total else 0.0
    fallbacks = [{"op": n.op, "reason": n.reason, "source": source_line(n.fx), "flops": flops(n),
                  "bytes": moved_bytes(n), "cpu_us": round(cpu.op_time_us(flops(n), moved_bytes(n)), 6),
                  "measured_us": round(host_us[id(n)], 3) if id(n) in host_us else None}
                 for n in host if n.host == "fallback"]
    cpu_us = round(sum(f["cpu_us"] for f in fallbacks), 6)
    steps = [{"op": n.op, "kind": n.host, "reason": n.reason} for n in host if n.host != "fallback"]
    card = sum(flops(k) for seg, _ in segments for k in seg.kernels)
    share = card / (card + sum(f["flops"] for f in fallbacks)) if card or fallbacks else 1.0
    return FrontendReport(total, round(total / machine.clock.ghz / 1000 + cpu_us, 6), kernels, fallbacks, steps,
                          trips, round(share, 6), cpu_us, [r.report.data for _, r in segments],
                          [seg.data for seg, _ in segments], inputs)


MATMULS = {"batchmatmul": 0, "aten.mm.default": 0, "aten.bmm.default": 0, "aten.addmm.default": 1}


def flops(node: Node) -> int:
    """A node's floating-point operations, the same count on the card and on the CPU: 2·M·N·K for a
    matmul (and 2 per output element and weight element for a convolution), one per output element
    for everything else."""
    out = sum(math.prod(v.shape) for v in node.outputs)
    if node.op in MATMULS:
        return 2 * out * node.inputs[MATMULS[node.op]].shape[-1]
    if node.op == "aten.convolution.default":
        return 2 * out * math.prod(node.inputs[1].shape[1:])
    return out


def moved_bytes(node: Node) -> int:
    """The bytes a host op reads and writes: its operands and results, once each."""
    return sum(math.prod(v.shape) * v.dtype.itemsize for v in (*node.inputs, *node.outputs))


def pcie_cycles(nbytes: int, machine: Machine) -> int:
    """One host copy in whole cycles, as the engine and the host model time it (``Machine.pcie_us``: the
    link's latency, then the bytes with TLP overhead; PCIe stays out of the kernel programs)."""
    return int(np.ceil(round(machine.pcie_us(nbytes) * machine.clock.ghz * 1000, 6)))


def _kernel_rows(seg: Segment, log: EventLog, launch: int, shapes: dict[int, list[dict[str, Any]]]
                 ) -> list[dict[str, Any]]:
    """One row per kernel when the lowering tags instructions with their kernel, else one for the
    program; the first is charged the program's launch. ``shapes`` holds the rows of each log already
    seen, by the program's own kernel names: the launches of identical layers share one log, and only
    the names differ."""
    if id(log) not in shapes:
        shapes[id(log)] = _program_rows(seg, log, launch)
    real = {seg.names[k.name]: k.name for k in seg.kernels}
    return [{**row, "name": real.get(row["name"], "+".join(k.name for k in seg.kernels))} for row in shapes[id(log)]]


def _program_rows(seg: Segment, log: EventLog, launch: int) -> list[dict[str, Any]]:
    groups: dict[str, list[int]] = {}
    for i, ins in enumerate(log.instructions):
        groups.setdefault(getattr(ins, "kernel", None) or "", []).append(i)
    by_name = {seg.names[k.name]: k for k in seg.kernels}
    columns = _Columns.of(log)
    rows = [_row(name, by_name.get(name), seg, log, columns, np.array(idx)) for name, idx in groups.items()]
    done = -launch
    for row in rows:  # kernels overlap: each is charged the time it adds to the program's end
        row["cycles"], done = max(row["end"] - done, 0), max(row["end"], done)
    return rows


KINDS = {"pt": 1, "sfu": 2}  # the units whose busy time makes a utilization


@dataclass(frozen=True)
class _Columns:
    """Per instruction: its unit's kind (``KINDS``, else 0), its core, the DRAM bytes a load or store moves,
    its duration; built in one pass, so a row sums them with numpy."""

    kind: np.ndarray
    core: np.ndarray
    dram: np.ndarray
    cycles: np.ndarray

    @staticmethod
    def of(log: EventLog) -> _Columns:
        ins, n = log.instructions, len(log.instructions)
        return _Columns(
            np.fromiter((KINDS.get(i.unit.rstrip("0123456789"), 0) for i in ins), np.int64, n),
            np.fromiter((i.core for i in ins), np.int64, n),
            np.fromiter((int(i.args.get("bytes", 0)) if i.unit in ("load", "store") and "dram" in i.args else 0
                         for i in ins), np.int64, n),
            log.end - log.start)


def _row(name: str, kernel: Node | None, seg: Segment, log: EventLog, columns: _Columns, idx: np.ndarray
         ) -> dict[str, Any]:
    start, end = int(log.start[idx].min()), int(log.end[idx].max())
    cycles = max(end - start, 0)
    kinds, spent = columns.kind[idx], columns.cycles[idx]
    busy = {kind: int(spent[kinds == code].sum()) for kind, code in KINDS.items()}
    cores = len(set(columns.core[idx].tolist()))  # not np.unique: its first call imports numpy.ma (20 ms)
    units = 2 * cores  # of each kind: two per core
    op = kernel.op if kernel else "+".join(sorted({k.op for k in seg.kernels}))
    return {"name": name, "op": op, "cores": cores, "span_cycles": cycles, "end": end,
            "pt_utilization": round(busy["pt"] / (cycles * units), 6) if cycles else 0.0,
            "sfu_utilization": round(busy["sfu"] / (cycles * units), 6) if cycles else 0.0,
            "dram_bytes": int(columns.dram[idx].sum())}
