"""Plots of a sweep's table: a figure against a parameter, a heatmap over two, a Pareto front.

Each returns a matplotlib Figure (no pyplot, no global state); rows the card could not run are left
out. ``spyre_emu.results.plots.image_bytes`` or ``Figure.savefig`` writes them.
"""

from __future__ import annotations

import json

import numpy as np
from matplotlib.figure import Figure

from .table import Table


def line(table: Table, x: str, y: str = "latency_us", group: str | None = None) -> Figure:
    """``y`` against ``x``, one line per value of ``group``."""
    good = table.ok()
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    groups = dict.fromkeys(json.dumps(v) for v in good.column(group)) if group else {"null": None}
    for g in groups:
        rows = [r for r in good.records() if not group or json.dumps(r[group]) == g]
        rows.sort(key=lambda r: r[x])
        ax.plot([r[x] for r in rows], [r[y] for r in rows], marker="o", label=f"{group} = {g}" if group else None)
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    if group:
        ax.legend()
    return fig


def heatmap(table: Table, x: str, y: str, value: str = "latency_us") -> Figure:
    """``value`` over the grid of ``x`` by ``y`` (the first row of each cell); empty cells stay blank."""
    good = table.ok()
    xs, ys = sorted(set(good.column(x))), sorted(set(good.column(y)))
    grid = np.full((len(ys), len(xs)), np.nan)
    for r in reversed(good.records()):
        grid[ys.index(r[y]), xs.index(r[x])] = r[value]
    fig = Figure(figsize=(6, 4.5))
    ax = fig.add_subplot()
    image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(len(xs)), [str(v) for v in xs])
    ax.set_yticks(range(len(ys)), [str(v) for v in ys])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    fig.colorbar(image, ax=ax, label=value)
    return fig


def pareto_front(table: Table, x: str, y: str = "latency_us") -> Table:
    """The rows no other row beats on both ``x`` and ``y`` (less is better for both)."""
    good = table.ok()
    rows = sorted(good.records(), key=lambda r: (r[x], r[y]))
    front, best_y = [], float("inf")
    for r in rows:
        if r[y] < best_y:
            front.append(tuple(r[c] for c in good.columns))
            best_y = r[y]
    return Table(good.columns, tuple(front))


def pareto(table: Table, x: str, y: str = "latency_us") -> Figure:
    """Every row as a point, the Pareto front of ``x`` and ``y`` as a line."""
    good, front = table.ok(), pareto_front(table, x, y)
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    ax.scatter(good.column(x), good.column(y), s=14, alpha=0.6, label="points")
    ax.plot(front.column(x), front.column(y), color="C3", marker="o", label="Pareto front")
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    ax.legend()
    return fig
