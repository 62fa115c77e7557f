"""The calibration cases of ``spyre-emu validate``: each simulated side by side in the process pool (its figures
kept in the result cache), then the page's section per category, per shape and per case, the cases not run,
and the log-log plot."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import memo
from ..config import Machine
from ..errors import SpyreEmuError
from ..pipeline import run
from ..pool import parallel_map
from .accuracy import Point, fits, mean_abs_error
from .calibration import Case
from .lx_plan import planned
from .measurements import MISS, signed_percent

RATIO = "division ratio (single)"  # the ratio of a pair's two measured times, shown beside them
RATIO_ALONE = "division ratio"  # a pair published as its ratio alone: its one figure
UNTIMED = ("PT utilization", RATIO, RATIO_ALONE)  # categories whose figures are not device times

def timed(points: list[Point]) -> list[Point]:
    """The points that are device times: what the timed mean and the plot are over."""
    return [p for p in points if p.category not in UNTIMED]


def counted(points: list[Point]) -> list[Point]:
    """The points the page's closing summary counts: a ratio of two figures measured two ways is shown, not counted
    again beside them (as the page's implied figures are not)."""
    return [p for p in points if p.category != RATIO]


@dataclass(frozen=True)
class NotRun:
    """A calibration case the simulator could not run, and the one-line reason (its file and row first)."""

    case: Case
    reason: str


def run_cases(machine: Machine, cases: list[Case], progress: Callable[[str], None] | None = None
              ) -> tuple[list[Point], list[NotRun]]:
    """Simulate every calibration case (side by side in the process pool) as points to compare. A case the
    lowering or the engine rejects (a division the card cannot run, a deadlock) is not run; the others are."""
    if progress:
        progress(f"{len(cases)} calibration cases")
    jobs = [(c.program, c.tiles, machine, c.source) for c in cases if not c.problem]
    simulated = iter(parallel_map(_case_figures, jobs))
    outcomes = [f"{c.source}: {c.problem}" if c.problem else next(simulated) for c in cases]  # figures or why not
    ran = [(c, figures) for c, figures in zip(cases, outcomes, strict=True) if not isinstance(figures, str)]
    points = [Point(c.category, c.shape, _label(c), c.measured_us, us) for c, (us, _) in ran
              if not np.isnan(c.measured_us)]  # a figure of PT utilization alone has no time
    points += [Point("PT utilization", "", c.name, c.pt_util_pct[0], pt, c.pt_util_pct[1]) for c, (_, pt) in ran
               if c.pt_util_pct]
    points += _pair_ratios(ran)
    return points, [NotRun(c, why) for c, why in zip(cases, outcomes, strict=True) if isinstance(why, str)]


def _pair_ratios(ran: list[tuple[Case, tuple[float, float]]]) -> list[Point]:
    """A single figure measured two ways (an old and a new work division: ``device_us`` with two names) is also
    judged as the ratio of its two times, first over second, as the division papers quote it; one published as
    that ratio alone (``Case.ratio``) is judged as it."""
    pairs: dict[str, list[tuple[Case, float]]] = {}
    for case, (us, _) in ran:
        if case.shape and case.category.endswith("(single)") and (case.ratio or not np.isnan(case.measured_us)):
            pairs.setdefault(case.shape, []).append((case, us))
    return [Point(RATIO_ALONE if a.ratio else RATIO, "", f"{shape}: {a.name} / {b.name}",
                  a.ratio or a.measured_us / b.measured_us, us_a / us_b)
            for shape, pair in pairs.items() if len(pair) == 2 for (a, us_a), (b, us_b) in [pair]]


def run_calibration(machine: Machine, cases: list[Case], progress: Callable[[str], None] | None = None) -> list[Point]:
    """The points of the cases that ran (benchmarks/sweep_cases.py times this call)."""
    return run_cases(machine, cases, progress)[0]


def _case_figures(job: tuple[dict, int, Machine, str]) -> tuple[float, float] | str:
    """(device µs, PT MAC utilization %) of one case's program, lowered and simulated here, or the one-line
    error that stopped it (naming ``source``, the case's file and row); the time is one launch and ``tiles`` runs
    of the program. The two figures are kept in the result cache under the program's JSON, the tiles, the
    machine and the code (memo.key), so a second validate of the same code and config neither lowers nor
    simulates again, and stores no event log."""
    data, tiles, machine, source = job
    k = memo.key(b"calibration case", memo.digest(data), str(tiles).encode(), repr(machine).encode())
    figures = memo.lookup(k)
    if figures is None:
        try:
            report = run(planned(data, machine, source), machine, cache=False).report.data
        except SpyreEmuError as exc:
            return str(exc)
        except Exception as exc:  # noqa: BLE001 -- a bug on one case must not take the other cases down
            return f"{source}: internal error, please report it: {type(exc).__name__}: {exc}"
        more_tiles_us = (tiles - 1) * report["card_cycles"] / report["clock_ghz"] / 1000
        figures = report["latency_us"] + more_tiles_us, 100 * report["pt"]["mac_utilization"]
        memo.store(k, figures)
    return figures


def _label(case: Case) -> str:
    """A case as the tables name it: a sweep row by its division, a single figure measured several ways
    (``name.way``) by the way and its division (two compiler settings may share one), any other by its name."""
    if not (case.split and case.shape):
        return case.name
    division = "(b, m, n, k) = (" + ", ".join(map(str, case.split)) + ")"
    way = case.name.removeprefix(case.shape + ".") if case.category.endswith("(single)") else case.name
    return division if way == case.name else f"{way}: {division}"


def render_calibration(points: list[Point], folder: str, plot: str | None, not_run: list[NotRun] | None = None) -> str:
    """The calibration section of docs/validation.md: per category, per shape, per case, then the cases
    that could not be run and why."""
    categories = fits(points)
    lines = ["", "## The calibration data", "",
             f"Every case of `{folder}` (the split sweep of matmuls and the single figures), "
             "simulated by the same lowering and engine. Spearman and regret are over the work divisions of "
             "one shape; regret is the measured time of the division the simulator ranks first over the "
             "measured best.", "",
             "| category | cases | mean abs. error | Spearman (mean, min) | best-split regret (mean, max) |",
             "|---|---|---|---|---|"]
    for c in categories:
        rho = [s.spearman for s in c.shapes if not np.isnan(s.spearman)]
        regret = [s.regret for s in c.shapes]
        lines.append(f"| {c.category} | {c.points} | {100 * c.mean_abs_error:.1f} % | "
                     + (f"{_rho(float(np.mean(rho)))}, {_rho(min(rho))}" if rho else "—") + " | "
                     + (f"{100 * np.mean(regret):.1f} %, {100 * max(regret):.1f} % |" if c.shapes else "— |"))
    times = timed(points)
    lines += ["", f"**Mean absolute error over all {len(times)} timed cases: {100 * mean_abs_error(times):.1f} %** "
              f"(target ≤ {100 * MISS:.0f} %)." if times else "No timed case ran.", "",
              "| shape | divisions | Spearman | measured best | simulator's first choice (measured) | regret |",
              "|---|---|---|---|---|---|"]
    for c in categories:
        lines += [f"| {s.shape} | {s.points} | {_rho(s.spearman)} | {s.best.label}: {s.best.measured:,.1f} µs | "
                  f"{s.chosen.label}: {s.chosen.measured:,.1f} µs | {100 * s.regret:.1f} % |" for s in c.shapes]
    lines += ["", "| case | measured | simulated | error |", "|---|---|---|---|"]
    lines += [f"| {p.category}: {p.shape + ' ' if p.shape else ''}{p.label} | {p.shown} | "
              f"{p.simulated:,.2f} | {signed_percent(p.error)} |" for p in points]
    if plot:
        lines += ["", f"![simulated against measured, one colour per category]({plot})"]
    if not_run:
        lines += ["", f"## Cases not run ({len(not_run)})", "",
                  "Cases the simulator rejected; they are in no figure above (`spyre-emu validate` exits with "
                  "status 2 after writing this file).", "", "| case | why |", "|---|---|"]
        lines += [f"| {n.case.shape or n.case.name} {_label(n.case) if n.case.shape else ''} | "
                  f"{n.reason.replace('|', '/')} |" for n in not_run]
    return "\n".join(lines) + "\n"


def _rho(value: float) -> str:
    """A rank correlation as the tables show it: a dash where it is undefined (one side tied throughout)."""
    return "—" if np.isnan(value) else f"{value:.2f}"


def plot_calibration(points: list[Point], path: Path) -> bytes:
    """Simulated against measured device time, log-log, one colour per category, as PNG bytes (``timed`` points:
    at least one)."""
    from matplotlib.figure import Figure  # noqa: PLC0415 -- matplotlib loads only when a plot is drawn
    fig = Figure(figsize=(6.4, 5.6))
    ax = fig.subplots()
    times = timed(points)
    for category in dict.fromkeys(p.category for p in times):
        mine = [p for p in times if p.category == category]
        ax.scatter([p.measured for p in mine], [p.simulated for p in mine], s=14, label=category)
    low, high = min(min(p.measured, p.simulated) for p in times), max(max(p.measured, p.simulated) for p in times)
    ax.plot([low, high], [low, high], color="grey", linewidth=0.8)
    ax.set(xscale="log", yscale="log", xlabel="measured on silicon (µs)", ylabel="simulated (µs)",
           title=f"spyre-emu against silicon ({path.name})")
    ax.legend(fontsize=8)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, metadata={"Software": None})
    return buffer.getvalue()
