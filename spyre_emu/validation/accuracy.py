"""How close simulated times are to measured ones: per category and per shape.

Three figures, as the calibration data asks for them: the mean absolute error of times, the
Spearman rank correlation of the work divisions of one shape (does the simulator order them as
the card does), and the best-split regret (the measured time of the division the simulator ranks
first over the measured best: what trusting the simulator would cost).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Point:
    category: str
    shape: str          # points of one shape are ranked against each other ("": none)
    label: str          # the work division, or the case name
    measured: float
    simulated: float
    high: float | None = None  # a measured range: ``measured`` to ``high``

    @property
    def error(self) -> float:
        return relative_error(self.simulated, self.measured, self.high)

    @property
    def shown(self) -> str:
        """The measured figure as a table shows it."""
        return f"{self.measured:,.2f}" + (f"–{self.high:,.2f}" if self.high is not None else "")


def relative_error(simulated: float, measured: float, high: float | None = None) -> float:
    """Relative to the measurement; for a range (``measured`` to ``high``) 0 inside it, else relative to its
    nearer end."""
    if high is None or simulated < measured:
        return simulated / measured - 1
    return max(simulated / high - 1, 0.0)


@dataclass(frozen=True)
class ShapeFit:
    shape: str
    points: int
    spearman: float
    regret: float       # measured time of the simulator's first choice / measured best - 1
    best: Point         # the measured best division
    chosen: Point       # the division the simulator ranks first (of several tied first, the one measured slowest)


@dataclass(frozen=True)
class CategoryFit:
    category: str
    points: int
    mean_abs_error: float
    shapes: list[ShapeFit]


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks from 1, ties sharing their mean rank (as Spearman's correlation needs)."""
    order = np.argsort(values, kind="stable")
    rank = np.empty(len(values))
    rank[order] = np.arange(1, len(values) + 1)
    for value in np.unique(values):
        tied = values == value
        rank[tied] = rank[tied].mean()
    return rank


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation of two equally long samples (nan when either is constant)."""
    ra, rb = ranks(np.asarray(a, float)), ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def shape_fit(shape: str, points: list[Point]) -> ShapeFit:
    """The ranking of a shape's divisions. Where the simulator ties several first, its first choice is the one
    measured slowest: it cannot tell them apart, and the regret does not hang on the order of the rows."""
    best = min(points, key=lambda p: p.measured)
    first = min(p.simulated for p in points)
    chosen = max((p for p in points if p.simulated == first), key=lambda p: p.measured)
    return ShapeFit(shape, len(points), spearman([p.measured for p in points], [p.simulated for p in points]),
                    chosen.measured / best.measured - 1, best, chosen)


def fits(points: list[Point]) -> list[CategoryFit]:
    """Per category, in first-seen order: its error and, for shapes with several divisions, their ranking."""
    by_category: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        by_category[p.category].append(p)
    out = []
    for category, members in by_category.items():
        shapes: dict[str, list[Point]] = defaultdict(list)
        for p in members:
            if p.shape:
                shapes[p.shape].append(p)
        out.append(CategoryFit(category, len(members), mean_abs_error(members),
                               [shape_fit(s, ps) for s, ps in shapes.items() if len(ps) > 1]))
    return out


class Compared(Protocol):
    """A simulated figure against its measurement: a calibration point, a validate row, a host row."""

    @property
    def error(self) -> float: ...


def mean_abs_error(points: Sequence[Compared]) -> float:
    return float(np.mean([abs(p.error) for p in points])) if points else 0.0
