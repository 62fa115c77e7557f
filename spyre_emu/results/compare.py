"""Two reports side by side, for CI: per-kernel cycles, a table, and which rows got slower than allowed.

Rows are the whole program, then each kernel by name (kernels only in one report are listed, never
failed on: a renamed kernel is not a slowdown). A row fails when its new cycles exceed the baseline's
by more than the threshold, in percent; faster rows never fail (``spyre-emu check`` says so, to
prompt a new baseline).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import SpyreEmuError
from ..unit_program.load import read_json
from .report import FORMAT

PROGRAM_ROW = "(program)"


@dataclass(frozen=True)
class Row:
    name: str
    base: int | None     # cycles in the baseline; None: not there
    new: int | None

    @property
    def change_pct(self) -> float | None:
        if self.base is None or self.new is None:
            return None
        return 100.0 * (self.new - self.base) / self.base if self.base else (0.0 if self.new == 0 else math.inf)

    def slower_than(self, threshold_pct: float) -> bool:
        change = self.change_pct
        return change is not None and change > threshold_pct


def read_report(path: str | Path) -> dict[str, Any]:
    """A report written by ``spyre-emu run --json``; anything else is a one-line error naming the file."""
    data = read_json(Path(path))
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SpyreEmuError(f"not a spyre-emu report (no \"format\": \"{FORMAT}\")", str(path))
    kernels = data.get("kernels")
    if not isinstance(data.get("total_cycles"), int) or not isinstance(kernels, list) or not all(
            isinstance(k, dict) and isinstance(k.get("name"), str) and isinstance(k.get("cycles"), int)
            for k in kernels):
        raise SpyreEmuError("not a spyre-emu report (total_cycles and kernels[].name, .cycles expected)", str(path))
    seen = {PROGRAM_ROW}
    for i, kernel in enumerate(kernels):
        if kernel["name"] in seen:
            raise SpyreEmuError(f"kernel {kernel['name']!r} has two rows; compare needs one row per name", str(path),
                                f"kernels[{i}].name")
        seen.add(kernel["name"])
    return data


def threshold(value: float, option: str) -> float:
    if not math.isfinite(value) or value < 0:
        raise SpyreEmuError(f"must be a percentage of 0 or more, not {value}", option)
    return value


def compare(base: dict[str, Any], new: dict[str, Any]) -> list[Row]:
    """The program row, then the baseline's kernels in its order, then kernels only in the new report."""
    before = {k["name"]: k["cycles"] for k in base["kernels"]}
    after = {k["name"]: k["cycles"] for k in new["kernels"]}
    names = list(before) + [n for n in after if n not in before]
    return [Row(PROGRAM_ROW, base["total_cycles"], new["total_cycles"])] + [
        Row(n, before.get(n), after.get(n)) for n in names]


def failures(rows: list[Row], threshold_pct: float | None) -> list[Row]:
    return [] if threshold_pct is None else [r for r in rows if r.slower_than(threshold_pct)]


def render(rows: list[Row], threshold_pct: float | None) -> str:
    width = max(len(r.name) for r in rows)
    lines = [f"{'kernel':<{width}}{'base cycles':>14}{'new cycles':>14}{'change':>10}  status"]
    for r in rows:
        lines.append(f"{r.name:<{width}}{_cell(r.base):>14}{_cell(r.new):>14}{_pct(r.change_pct):>10}  "
                     f"{_status(r, threshold_pct)}")
    failed = failures(rows, threshold_pct)
    if threshold_pct is not None:
        lines.append(f"{len(failed)} of {len(rows)} rows slower than the baseline by more than {threshold_pct:g}%"
                     if failed else f"no row slower than the baseline by more than {threshold_pct:g}%")
    return "\n".join(lines) + "\n"


def _cell(cycles: int | None) -> str:
    return "-" if cycles is None else f"{cycles:,}"


def _pct(change: float | None) -> str:
    return "" if change is None else f"{change:+.2f}%"


def _status(row: Row, threshold_pct: float | None) -> str:
    if row.base is None:
        return "new"
    if row.new is None:
        return "gone"
    if threshold_pct is not None and row.slower_than(threshold_pct):
        return "SLOWER"
    change = row.change_pct or 0.0
    return "slower" if change > 0 else ("faster" if change < 0 else "same")
