"""The calibration cases with the host, or a whole block, in them: docs/validation.md's section of their own.

Three measurements of measurements.json time whole calls through torch-spyre, not one hand-made kernel:

- ``launch_phases_mean``: the host's phases of one LaunchKernel of torch-spyre's examples/mean.py, a
  first call on sendnn's graph path (PR 1728). The host model launches the front end's program once,
  cold and synchronous. Deserialization and preparation are configs/host.toml's ``deserialize_us`` and
  ``prepare_us``, which were taken from this very measurement: those rows check consistency and are not
  counted. Compute, from the end of preparation to the host hearing of the kernel's end (the card's
  dispatch, the kernel, the completion notice), is a prediction.
- ``sdpa_encoder_b1``: wall time per call of a fused SDPA, host included: a warm call with graphs
  cached (torch-spyre's JobPlan path), each of the front end's launches patched and queued (one launch:
  the front end fuses the attention into one program, its scores in LX).
- ``block_granite_prefill``: the device time of one Granite-3.3-8B block, the sum of its kernel
  programs' times, broken down by kernel class so that a miss says where it comes from. The measured
  graph gets the parameters in torch's [out, in] layout and transposes its weights on the card every
  call (ReStickifyOpHBM, DRAM to DRAM: AdnanHoque/torch-spyre
  docs/results/granite_e2e/comms_collectives_20260629.md), so its launches are compiled with
  ``weights="stored"``, which does the same, not with the front end's default (weights prepared on the host).
- ``swiglu_granite_prefill``: the PT utilization of a whole SwiGLU MLP prefill, a range quoted by issue 12
  (calibration.QUOTED): inside the range the error is 0, outside it is relative to the nearest end.

The kernel programs are the torch front end's, written ahead by examples/make_frontend_calibration.py
(spyre_emu never imports torch); the measured figures are read from measurements.json. Why a row
misses lives here, as measurements.py's analysis does for its rows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Machine
from ..errors import SpyreEmuError
from ..host import Host, Launch, simulate_host
from ..pipeline import Program, parse, timings
from ..results import Report
from ..unit_program.load import read_json
from .accuracy import mean_abs_error, relative_error
from .measurements import MISS, signed_percent

FORMAT = "spyre-emu.launches"
CLASSES = ("matmul", "attention", "norm", "relayout", "pointwise")
NORMS = ("rmsnorm", "layernorm", "layernormscale", "layernormnorm")
RELAYOUTS = ("ReStickifyOpHBM", "identity")
CONSISTENCY = "consistency: configs/host.toml took this constant from the same measurement"


@dataclass(frozen=True)
class HostRow:
    """One measured figure of a case and the model's; ``counted``: in the section's mean error."""

    case: str
    figure: str
    measured: float
    simulated: float
    counted: bool
    note: str = ""
    why: str = ""    # shown when a counted figure misses by more than measurements.MISS
    high: float | None = None   # a measured range: ``measured`` to ``high``
    unit: str = "µs"

    @property
    def error(self) -> float:
        return relative_error(self.simulated, self.measured, self.high)

    @property
    def shown(self) -> str:
        """The measured figure as the table shows it."""
        low = f"{self.measured:,.1f}"
        return f"{low}–{self.high:,.1f} {self.unit}" if self.high is not None else f"{low} {self.unit}"


@dataclass(frozen=True)
class Launched:
    """A call's kernel programs as launched, with their reports."""

    kernels: list[dict[str, Any]]   # each kernel program's JSON
    reports: list[Report]

    @property
    def card_us(self) -> list[float]:
        return [r.data["latency_us"] for r in self.reports]


def _path(folder: Path, name: str) -> Path:
    return folder / f"{name}.launches.json"


def _launch_list(folder: Path, name: str) -> list[dict[str, Any]]:
    path = _path(folder, name)
    if not path.is_file():
        raise SpyreEmuError("launch list missing (python examples/make_frontend_calibration.py writes it)", str(path))
    data = read_json(path)
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SpyreEmuError(f"expected format {FORMAT!r}", str(path), "format")
    launches = data.get("launches")
    if not isinstance(launches, list) or not launches:
        raise SpyreEmuError("expected a non-empty list of kernel programs", str(path), "launches")
    return launches


def parse_launches(folder: Path, name: str, machine: Machine) -> tuple[list[dict[str, Any]], list[Program]]:
    """A call's kernel programs (JSON) and their lowered programs, in launch order."""
    kernels, programs = _launch_list(folder, name), []
    for i, program in enumerate(kernels):
        try:
            programs.append(parse(program, machine, str(_path(folder, name))))
        except SpyreEmuError as exc:
            where = f"launches[{i}]" + (f".{exc.path}" if exc.path and exc.path != "(top level)" else "")
            raise SpyreEmuError(exc.message, exc.file, where) from None
    return kernels, programs


def figures(entry: dict[str, Any], paths: tuple[str, ...], where: str) -> dict[str, float]:
    """The measured figures at ``paths`` (``key`` or ``key.sub``) of a measurements.json entry, checked,
    by their last part."""
    out = {}
    for path in paths:
        value: Any = entry
        for part in path.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise SpyreEmuError(f"expected a positive number, got {value!r}", where,
                                f"cases[{entry.get('name')}].{path}")
        out[path.split(".")[-1]] = float(value)
    return out


def launch_phase_rows(phases: dict[str, float], card_us: float, host: Host, machine: Machine) -> list[HostRow]:
    """examples/mean.py's first LaunchKernel on the graph path: one cold launch the host waits for."""
    timeline = simulate_host([Launch("mean", card_us)], host, machine, cached_launches=False)
    built = next(s.end for s in timeline.spans if s.where == "host")
    rt, dispatch = host.runtime, machine.launch_us()
    compute = (f"the card's dispatch {dispatch:.1f} µs, the kernel {card_us - dispatch:.1f} µs, completion "
               f"{rt.completion_us:.1f} µs")
    name = "launch_phases_mean"
    return [HostRow(name, "deserialization", phases["deserialization"], rt.deserialize_us, False, CONSISTENCY),
            HostRow(name, "preparation", phases["preparation"], rt.prepare_us, False, CONSISTENCY),
            HostRow(name, "compute", phases["compute"], timeline.end_us - built, True, compute, FIRST_CALL.format(
                graph_us=rt.graph_us)),
            HostRow(name, "total", phases["total"], timeline.end_us, False,
                    f"{rt.deserialize_us + rt.prepare_us:,.1f} µs of it are the two constants above")]


def call_wall_rows(wall: dict[str, float], card_us: list[float], host: Host, machine: Machine) -> list[HostRow]:
    """A warm call, graphs cached: the host patches each launch and queues it; the call ends when the host
    hears of its last kernel."""
    timeline = simulate_host([Launch(f"p{i}", us) for i, us in enumerate(card_us)], host, machine, warm=True)
    launches = f"{len(card_us)} launch{'es' if len(card_us) > 1 else ''}"
    how = (f"{launches}: {sum(card_us):,.1f} µs on the card, "
           f"{'each ' if len(card_us) > 1 else ''}patched in {host.runtime.patch_us:.0f} µs")
    name = "sdpa_encoder_b1"
    return [HostRow(name, "wall per call, mean", wall["wall_us_mean"], timeline.end_us, True, how, FUSED),
            HostRow(name, "wall per call, min", wall["wall_us_min"], timeline.end_us, False,
                    "the same call; its mean is counted")]


def kernel_class(kernel: dict[str, Any]) -> str:
    """A kernel's class by its op: a batched matmul over heads (an ``x`` dim) and softmax are attention."""
    op = kernel["op"]
    if op == "batchmatmul":
        return "attention" if "x" in kernel["dims"] else "matmul"
    if op == "softmax":
        return "attention"
    return "norm" if op in NORMS else "relayout" if op in RELAYOUTS else "pointwise"


def by_class(launched: Launched) -> dict[str, tuple[int, float]]:
    """(kernels, µs) per class: each program's time shared among its kernels as their own cycles are
    (the report's per-kernel span; a fused program's kernels overlap, so the shares are approximate)."""
    out = {c: (0, 0.0) for c in CLASSES}
    for program, report, us in zip(launched.kernels, launched.reports, launched.card_us, strict=True):
        cycles = {k["name"]: k["cycles"] for k in report.data["kernels"]}
        total = sum(cycles.values())
        for kernel in program["kernels"]:
            n, t = out[kernel_class(kernel)]
            out[kernel_class(kernel)] = (n + 1, t + us * cycles[kernel["name"]] / total)
    return out


def block_rows(device: dict[str, float], launched: Launched) -> list[HostRow]:
    """The block's device time: the sum of its kernel programs' times (each with its dispatch)."""
    total, classes = sum(launched.card_us), by_class(launched)
    shares = ", ".join(f"{c} {us:,.0f}" for c, (n, us) in classes.items() if n)
    how = f"{len(launched.kernels)} kernel programs, {STORED}; µs by class: {shares}"
    matmul = classes["matmul"][1]
    why = OUTSIDE_MATMULS.format(off=(device["relayout_off"] - matmul) / 1000, on=(device["lx_relayout_on"] - matmul)
                                 / 1000, ours=(total - matmul) / 1000,
                                 saved=device["relayout_off"] - device["lx_relayout_on"])
    name = "block_granite_prefill"
    return [HostRow(name, "device time, relayout off", device["relayout_off"], total, True, how, why),
            HostRow(name, "device time, LX relayout on", device["lx_relayout_on"], total, False,
                    "the front end relayouts through DRAM (ReStickifyOpHBM), as the relayout-off setting does; "
                    "that row is counted")]


def peak_macs_per_us(machine: Machine) -> float:
    """The card's fp16 PT peak: every core's arrays (one per corelet), each MAC lane every cycle."""
    return machine.cores.count * machine.cores.corelets * machine.pt.macs_per_cycle("fp16") * machine.clock.ghz * 1e3


def mlp_rows(util: dict[str, float], launched: Launched, machine: Machine) -> list[HostRow]:
    """A whole MLP's PT utilization: its matmuls' MACs (the kernels' dims, padding not counted) over the card's
    peak times the sum of its kernel programs' times (each with its dispatch)."""
    macs = sum(math.prod(k["dims"].values()) for p in launched.kernels for k in p["kernels"]
               if k["op"] == "batchmatmul")
    total, classes, peak = sum(launched.card_us), by_class(launched), peak_macs_per_us(machine)
    shares = ", ".join(f"{c} {us:,.0f}" for c, (n, us) in classes.items() if n)
    how = (f"{macs / 1e9:,.2f} GMAC in {total:,.1f} µs ({len(launched.kernels)} kernel programs, µs by class: "
           f"{shares}) at the card's peak {peak / 1e6:.2f} TMAC/s ({machine.cores.count} cores × "
           f"{machine.cores.corelets * machine.pt.macs_per_cycle('fp16')} MAC/cycle × {machine.clock.ghz} GHz); "
           "measured: a range (error 0 inside it, else relative to its nearest end)")
    pointwise = total - classes["matmul"][1]
    why = (f"outside the matmuls the MLP spends {pointwise:,.0f} µs ({100 * pointwise / total:.0f} %): the silu and "
           "the mul run as kernels of their own, through DRAM where their operands do not fit in LX")
    return [HostRow("swiglu_granite_prefill", "PT utilization, whole MLP", util["low"], 100 * macs / (peak * total),
                    True, how, why, util["high"], "%")]


Rows = Callable[[dict[str, float], Launched, Host, Machine], list[HostRow]]
CASES: dict[str, tuple[tuple[str, ...], Rows]] = {  # a whole call: its measured figures, its rows
    "launch_phases_mean": (tuple(f"phases_us.{p}" for p in ("deserialization", "preparation", "compute", "total")),
                           lambda measured, run, host, m: launch_phase_rows(measured, run.card_us[0], host, m)),
    "sdpa_encoder_b1": (("wall_us_mean", "wall_us_min"),
                        lambda measured, run, host, m: call_wall_rows(measured, run.card_us, host, m)),
    "block_granite_prefill": (("device_us.relayout_off", "device_us.lx_relayout_on"),
                              lambda measured, run, host, m: block_rows(measured, run)),
    "swiglu_granite_prefill": (("pt_util_pct.low", "pt_util_pct.high"),
                               lambda measured, run, host, m: mlp_rows(measured, run, m)),
}


def host_cases(entries: dict[str, dict[str, Any]], machine: Machine, host: Host, folder: Path, where: str,
               progress: Callable[[str], None] | None = None) -> tuple[list[HostRow], Launched | None]:
    """The rows of every case in ``entries`` (measurements.json's, by name; ``where`` is its file) and the block's
    launches. Every figure is read and every program lowered before the first is simulated."""
    chosen = [n for n in CASES if n in entries]
    measured = {n: figures(entries[n], CASES[n][0], where) for n in chosen}
    parsed = {n: parse_launches(folder, n, machine) for n in chosen}
    rows: list[HostRow] = []
    block = None
    for name in chosen:
        if progress:
            progress(name)
        kernels, programs = parsed[name]
        launched = Launched(kernels, [report for _, report in timings(programs, machine)])
        rows += CASES[name][1](measured[name], launched, host, machine)
        block = launched if name == "block_granite_prefill" else block
    return rows, block


FIRST_CALL = ("the kernel is tiny (a mean over 128 × 64); on sendnn's graph path the compute phase of LaunchKernel "
              "runs the graph loader's Predict (the DeviceInit super-node) and Compute through the runtime "
              "(torch-spyre's module.cpp of the time), host work the model has no figure for on a first call: its "
              "graph cost (graph_us, {graph_us:.1f} µs, derived from IBM's decode) is charged to later launches only")
FUSED = ("the model is faster than silicon: the front end runs SDPA as one program, Q·Kᵀ, the scale, softmax and "
         "P·V split alike over heads × query rows, the 12 × 512 × 512 scores and probabilities kept in LX (no DRAM "
         "round trip, as torch-spyre's fused kernel keeps them; docs/frontend.md, pass 6). Where silicon's 24 SDSCs "
         "spend the rest is not in the data (no per-SDSC times); in the model Q·Kᵀ is DRAM-bound (each core reads "
         "its rows of Q again per output stick) and softmax SFU-bound")
STORED = ("the weights kept in torch's [out, in] layout and transposed on the card before their matmuls every call, "
          "as the measured compiled graph does (weights=\"stored\"; AdnanHoque/torch-spyre "
          "comms_collectives_20260629.md)")
OUTSIDE_MATMULS = (
    "the matmuls are not where it misses: silicon's tuned divisions of the same projections take what the model "
    "gives (the PT utilization and prefill single rows below), so silicon spends about {off:.1f} ms ({on:.1f} ms "
    "with LX relayout) outside the matmuls against the model's {ours:.1f} ms. Both settings run the same "
    "ReStickifyOpHBM rows: LX relayout's {saved:,.0f} µs come from intermediates kept in LX inside silicon's "
    "fused chains (the source's spill inventory), not from fewer relayouts")


def render_host(rows: list[HostRow], block: Launched | None) -> str:
    """docs/validation.md's section for these cases: the rows, their mean error, the block by class."""
    lines = ["", "## With the host, and a whole block", "",
             "These rows run the kernel programs the torch front end launches for the call "
             "(`examples/programs/calibration/*.launches.json`, written by "
             "`examples/make_frontend_calibration.py`) through the card model and the host model "
             "(`configs/host.toml`, [host.md](host.md)). A row the model took a constant from is a check of "
             "consistency, not of prediction: it is shown and not counted.", "",
             "| case | figure | measured | simulated | error | counted | how the model gets it | why it misses |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        why = r.why if r.counted and abs(r.error) > MISS else "—"
        lines.append(f"| `{r.case}` | {r.figure} | {r.shown} | {r.simulated:,.1f} {r.unit} | "
                     f"{signed_percent(r.error)} | {'yes' if r.counted else 'no'} | {r.note} | {why} |")
    counted = [r for r in rows if r.counted]
    if counted:
        lines += ["", f"**Mean absolute error: {100 * mean_abs_error(counted):.1f} %** over {len(counted)} "
                  f"counted figures (target ≤ {100 * MISS:.0f} %)."]
    if block:
        total = sum(block.card_us)
        lines += ["", "The block's simulated device time by kernel class (a fused program's time shared among "
                  "its kernels by their own cycles; a batched matmul over heads and softmax are attention, "
                  "RoPE's rotation is a matmul):", "", "| class | kernels | µs | share |", "|---|---|---|---|"]
        lines += [f"| {c} | {n} | {us:,.1f} | {100 * us / total:.1f} % |" for c, (n, us) in by_class(block).items()]
    return "\n".join(lines) + "\n"
