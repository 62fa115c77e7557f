"""Plots of a report: a Gantt chart, a utilization heatmap, a roofline and ring-link occupancy.

Each function takes a report (a ``Report`` or its JSON dict) and returns a matplotlib ``Figure``
built without pyplot, so no global state changes: a notebook shows it (``%matplotlib inline``), the
CLI saves it. Time axes are in cycles, the simulator's exact unit; titles give the clock.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..config import Machine
from ..engine.log import EventLog
from ..errors import SpyreEmuError
from ..unit_program.opcodes import CORE_UNITS, HOST_UNIT, unit_kind
from .kernels import peak_flops_per_cycle
from .report import Report

UNIT_COLORS = {"load": "tab:blue", "store": "tab:orange", "send": "tab:purple", "lx2fifo": "tab:cyan",
               "fifo2lx": "tab:olive", "pt": "tab:red", "sfu": "tab:green", "pcie": "tab:gray"}
BOUND_COLORS = {"memory": "tab:blue", "compute": "tab:red"}
MAX_BARS = 5000           # more instructions than this and a Gantt chart is drawn from the activity bins
LABELLED_TRACKS = 40      # more tracks than this and the y axis names cores, not each core's units
CHAR_WIDTH = 1 / 150      # a 7-point character, as a fraction of a timeline's width


def _data(report: Report | dict[str, Any]) -> dict[str, Any]:
    """The report's dict, checked to be one: every plot's title reads these three figures."""
    data = report.data if isinstance(report, Report) else report
    for key in ("total_cycles", "clock_ghz", "latency_us"):
        _section(data, key)
    return data


def _card_cycles(data: dict[str, Any]) -> int:
    """The card's cycles, which the time axes span (reports before the launch cost had only the total)."""
    return data.get("card_cycles", data["total_cycles"])


def _section(data: Any, key: str) -> Any:
    """The report's ``key``; an error (naming ``key``) when the JSON is not a report that has it."""
    if not isinstance(data, dict) or key not in data:
        raise SpyreEmuError("missing: not a spyre-emu report (spyre-emu run --json writes one)", path=key)
    return data[key]


def _busy(data: dict[str, Any], key: str) -> tuple[list[str], np.ndarray, int]:
    """Names, the [rows, bins] busy fractions and the bin width of ``activity.<key>``."""
    activity = _section(data, "activity")
    rows = _section(activity, key)
    try:
        names = [str(row["name"]) for row in rows]
        busy = np.array([row["busy"] for row in rows], dtype=float).reshape(len(rows), -1)
        bin_cycles = int(activity["bin_cycles"])
    except (KeyError, TypeError, ValueError):
        raise SpyreEmuError("expected bin_cycles and rows of name and equal-length busy fractions",
                            path=f"activity.{key}") from None
    return names, busy, bin_cycles


def _title(data: dict[str, Any], what: str) -> str:
    return f"{what}: {data.get('program', '')}\n{data['total_cycles']} cycles at {data['clock_ghz']} GHz " \
           f"= {data['latency_us']:.2f} us (time axis: the card, after the launch)"


def _unit_color(track: str) -> str:
    return UNIT_COLORS.get(unit_kind(track.rsplit(".", 1)[-1]), "black")


def _label_tracks(ax: Axes, names: list[str]) -> None:
    """A y label per row while they fit; past that, rows named ``core3.*`` are labelled once per core,
    at the middle of its rows, with the units' order (when every core has the same) in the axis label."""
    ax.set_ylim(len(names) - 0.5, -0.5)
    groups: dict[str, list[int]] = {}
    for row, name in enumerate(names):
        groups.setdefault(name.split(".", 1)[0], []).append(row)
    if len(names) <= LABELLED_TRACKS or len(groups) == len(names):
        step = -(-len(names) // (2 * LABELLED_TRACKS))
        ax.set_yticks(range(0, len(names), step), names[::step], fontsize=7 if len(names) <= LABELLED_TRACKS else 6)
        return
    step = -(-len(groups) // LABELLED_TRACKS)
    ticks = list(groups.items())[::step]
    ax.set_yticks([(rows[0] + rows[-1]) / 2 for _, rows in ticks], [group for group, _ in ticks], fontsize=7)
    for rows in list(groups.values())[1:]:
        ax.axhline(rows[0] - 0.5, color="0.85", linewidth=0.5)
    units = {tuple(names[r].split(".", 1)[-1] for r in rows) for rows in groups.values()}
    if len(units) == 1:
        ax.set_ylabel("core (rows: " + ", ".join(units.pop()) + ")")


def _figure(rows: int, lanes: int = 0) -> tuple[Figure, Axes | None, Axes]:
    """A figure sized to its rows, with a band of ``lanes`` kernel lanes on top when there are kernels."""
    height, band = min(12.0, 1.5 + 0.16 * rows), 0.4 + 0.3 * lanes if lanes else 0.0
    fig = Figure(figsize=(11, 1.0 + height + band), layout="constrained")
    if not lanes:
        return fig, None, fig.add_subplot()
    top, ax = fig.subplots(2, 1, sharex=True, height_ratios=[band, height])
    return fig, top, ax


def _log_spans(log: EventLog) -> dict[str, list[tuple[int, int]]]:
    """Per track (``core3.pt0``, ``pcie``), each instruction's (start, duration), tracks in core x unit order."""
    keyed: dict[tuple[tuple[bool, int, int], str], list[tuple[int, int]]] = {}
    for ins, start, end in zip(log.instructions, log.start, log.end, strict=True):
        host = ins.core < 0
        key = (host, ins.core, 0 if host else CORE_UNITS.index(ins.unit))
        name = HOST_UNIT if host else f"core{ins.core}.{ins.unit}"
        keyed.setdefault((key, name), []).append((int(start), int(end - start)))
    return {name: bars for (_, name), bars in sorted(keyed.items())}


def _kernel_lanes(kernels: list[dict[str, Any]]) -> list[int]:
    """A lane per kernel: kernels overlap in time, so each goes on the first lane free at its start."""
    ends: list[int] = []
    lanes = []
    for kernel in kernels:
        lane = next((i for i, end in enumerate(ends) if end <= kernel["start_cycle"]), len(ends))
        ends[lane:lane + 1] = [kernel["end_cycle"]]
        lanes.append(lane)
    return lanes


def _draw_kernels(ax: Axes, kernels: list[dict[str, Any]], lanes: list[int], total: int) -> None:
    for kernel, lane in zip(kernels, lanes, strict=True):
        start, width = kernel["start_cycle"], kernel["end_cycle"] - kernel["start_cycle"]
        ax.broken_barh([(start, width)], (lane - 0.4, 0.8), facecolors="0.75", edgecolors="0.3", linewidth=0.5)
        if width / total >= (len(kernel["name"]) + 2) * CHAR_WIDTH:  # the name fits inside its bar
            ax.text(start + width / 2, lane, kernel["name"], ha="center", va="center", fontsize=7, clip_on=True)
    ax.set_ylim(max(lanes) + 0.5, -0.5)
    ax.set_yticks([])
    ax.set_ylabel("kernels", fontsize=8)


def _draw_bars(ax: Axes, spans: dict[str, list[tuple[int, int]]]) -> str:
    for row, (name, bars) in enumerate(spans.items()):
        ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=_unit_color(name))
    return "cycle (a bar per instruction)"


def _draw_bins(ax: Axes, names: list[str], busy: np.ndarray, bin_cycles: int) -> str:
    edges = np.arange(busy.shape[1] + 1) * bin_cycles
    for row, (name, fractions) in enumerate(zip(names, busy, strict=True)):
        ax.stairs(row + 0.4 - 0.8 * fractions, edges, baseline=row + 0.4, fill=True, color=_unit_color(name))
    return f"cycle (bar height: busy fraction of each {bin_cycles}-cycle bin)"


def gantt(report: Report | dict[str, Any], log: EventLog | None = None, max_bars: int = MAX_BARS) -> Figure:
    """Core x unit tracks over time, the program's kernels above them.

    Given the run's EventLog and at most ``max_bars`` instructions, each instruction is one bar.
    Otherwise (a report read from JSON, or more bars than can be told apart) each track is filled,
    bin by bin of ``activity``, to the fraction of the bin its unit was busy.
    """
    data = _data(report)
    kernels = data.get("kernels") or []
    spans = _log_spans(log) if log is not None and len(log.instructions) <= max_bars else None
    binned = _busy(data, "tracks") if spans is None else None
    names = binned[0] if binned is not None else list(spans)
    lanes = _kernel_lanes(kernels)
    fig, top, ax = _figure(len(names), max(lanes, default=-1) + 1)
    if top is not None:
        _draw_kernels(top, kernels, lanes, _card_cycles(data))
    ax.set_xlabel(_draw_bins(ax, *binned) if binned is not None else _draw_bars(ax, spans))
    _label_tracks(ax, names)
    ax.set_xlim(0, max(_card_cycles(data), 1))
    kinds = dict.fromkeys(unit_kind(name.rsplit(".", 1)[-1]) for name in names)
    ax.legend(handles=[Patch(color=UNIT_COLORS.get(k, "black"), label=k) for k in kinds], loc="upper left",
              bbox_to_anchor=(1.0, 1.0), fontsize=8, title="unit", title_fontsize=8)
    fig.suptitle(_title(data, "Timeline"), fontsize=10)
    return fig


def _busy_map(data: dict[str, Any], key: str, what: str, ylabel: str) -> Figure:
    names, busy, bin_cycles = _busy(data, key)
    fig, _, ax = _figure(len(names))
    image = ax.imshow(busy, aspect="auto", interpolation="nearest", cmap="viridis", vmin=0.0, vmax=1.0,
                      extent=(0, busy.shape[1] * bin_cycles, len(names) - 0.5, -0.5))
    ax.set_ylabel(ylabel)
    _label_tracks(ax, names)
    ax.set_xlim(0, max(_card_cycles(data), 1))
    ax.set_xlabel(f"cycle ({bin_cycles}-cycle bins)")
    fig.colorbar(image, ax=ax, label="busy fraction of the bin", fraction=0.03, pad=0.01)
    fig.suptitle(_title(data, what), fontsize=10)
    return fig


def heatmap(report: Report | dict[str, Any]) -> Figure:
    """Utilization of every core x unit track (rows) in each time bin (columns), 0 to 1."""
    return _busy_map(_data(report), "tracks", "Unit utilization", "core.unit")


def ring(report: Report | dict[str, Any]) -> Figure:
    """Occupancy of each ring link that carried sticks (rows) in each time bin: 1 is a stick every cycle."""
    return _busy_map(_data(report), "links", "Ring-link occupancy", "link")


def _peaks(data: dict[str, Any], machine: Machine | None) -> tuple[float, float]:
    """The card's peak flops and DRAM bytes per cycle: ``machine``'s when given, else the report's own."""
    if machine is not None:
        return float(peak_flops_per_cycle(machine, machine.cores.count)), machine.dram.peak_bytes_per_cycle()
    peaks = _section(data, "machine")
    return float(peaks["peak_flops_per_cycle"]), float(peaks["peak_dram_bytes_per_cycle"])


def roofline(report: Report | dict[str, Any], machine: Machine | None = None) -> Figure:
    """Each kernel at its arithmetic intensity (flops per DRAM byte) and the TFLOP/s it attained,
    under the roof: peak DRAM bandwidth times intensity, capped by the whole card's fp16 PT peak (a
    kernel on fewer cores has a lower roof of its own; its ``bound`` in the report says which it hit).

    Kernels with no flops or no DRAM bytes have no place on log axes; the title counts them.
    """
    data = _data(report)
    peak_flops, peak_bytes = _peaks(data, machine)
    tera = data["clock_ghz"] / 1000.0  # flops per cycle -> TFLOP/s
    kernels = _section(data, "kernels")
    drawn = [k for k in kernels if k["roofline"]["flops"] > 0 and k["roofline"]["bytes"] > 0]
    ridge = peak_flops / peak_bytes
    xs = np.array([k["roofline"]["intensity"] for k in drawn], dtype=float)
    lo, hi = min(xs.min(initial=ridge), ridge) / 10, max(xs.max(initial=ridge), ridge) * 10
    fig = Figure(figsize=(9, 6), layout="constrained")
    ax = fig.add_subplot()
    ax.loglog([lo, ridge, hi], [lo * peak_bytes * tera, peak_flops * tera, peak_flops * tera], color="black",
              label=f"roof: DRAM {peak_bytes * data['clock_ghz']:.1f} GB/s, PT {peak_flops * tera:.1f} TFLOP/s")
    for bound in dict.fromkeys(k["roofline"]["bound"] for k in drawn):
        mine = [k for k in drawn if k["roofline"]["bound"] == bound]
        ax.scatter([k["roofline"]["intensity"] for k in mine],
                   [k["roofline"]["attained_flops_per_cycle"] * tera for k in mine],
                   color=BOUND_COLORS.get(bound, "tab:gray"), label=f"{bound}-bound", zorder=3)
    for i, k in enumerate(drawn):  # names alternately above and below their point: neighbours often overlap
        ax.annotate(k["name"], (k["roofline"]["intensity"], k["roofline"]["attained_flops_per_cycle"] * tera),
                    xytext=(4, 4 if i % 2 == 0 else -10), textcoords="offset points", fontsize=7)
    _plain_log_ticks(ax)
    ax.set_xlabel("arithmetic intensity (flops per DRAM byte)")
    ax.set_ylabel("attained TFLOP/s")
    ax.grid(True, which="both", color="0.9", linewidth=0.5)
    ax.legend(fontsize=8, loc="lower right")
    skipped = len(kernels) - len(drawn)
    note = f"; {skipped} kernel(s) without flops or DRAM bytes not drawn" if skipped else ""
    fig.suptitle(_title(data, "Roofline") + note, fontsize=10)
    return fig


def _plain_log_ticks(ax: Axes) -> None:
    """Ticks as plain numbers (0.1, 20), at 1, 2 and 5 of each decade when the axis spans few decades
    (matplotlib would label its minor ticks 2x10^1, 5x10^1 there)."""
    for axis, (lo, hi) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if np.log10(hi / lo) < 3 else (1.0,)))
        axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
        axis.set_minor_formatter(NullFormatter())


def image_bytes(figure: Figure, name: str) -> bytes:
    """``figure`` encoded in the format that the suffix of the file ``name`` names (.png, .svg, .pdf, ...)."""
    fmt = Path(name).suffix.lstrip(".").lower()
    if fmt not in figure.canvas.get_supported_filetypes():
        raise SpyreEmuError(f"unknown image format {fmt!r}; expected a file name ending in .png, .svg or .pdf",
                            name)
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=110)
    return buffer.getvalue()


KINDS = {"gantt": gantt, "heatmap": heatmap, "roofline": roofline, "ring": ring}
