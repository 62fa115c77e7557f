"""Activity over time: per unit and per ring link, the busy fraction of each time bin.

Bins are ``bin_cycles`` wide, at most MAX_BINS of them (the last one may be shorter; its fraction
is of its own width). The engine logs when each instruction ran, not each of its cycles, so an
instruction's work is spread evenly over its start..end: a unit's busy cycles (its duration less
its FIFO stalls), a transfer's sticks on each link it crosses (a link carries one stick a cycle),
its DRAM bytes. The bins therefore add up exactly to the report's totals: a unit's busy cycles,
a link's sticks, the bytes moved.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import Machine
from ..engine.log import EventLog
from .kernels import Units, previous_end
from .traffic import Traffic

MAX_BINS = 400
DIGITS = 4


def activity(log: EventLog, machine: Machine, traffic: Traffic, units: Units, link_names: dict[int, str]
             ) -> dict[str, Any]:
    total = log.total_cycles
    width = max(1, -(-total // MAX_BINS))
    edges = np.minimum(np.arange(-(-total // width) + 1) * width, total).astype(np.float64)
    sizes = np.maximum(np.diff(edges), 1)
    start, end = log.start.astype(np.float64), log.end.astype(np.float64)
    begin = busy_start(log, units)
    unit_rates = _unit_rates(log, units, begin)
    rows = [(begin[i], end[i], rate) for i, rate in unit_rates.values()]
    links = sorted(link_names)
    for on in _rows_of(traffic.link, links):  # each link's rows, in their order
        ins = traffic.link_ins[on]
        rows.append((start[ins], end[ins], traffic.link_sticks[on] / np.maximum(end[ins] - start[ins], 1)))
    dram = traffic.dram_read + traffic.dram_write
    moving = dram > 0
    rows.append((start[moving], end[moving], dram[moving] / np.maximum(end - start, 1)[moving]))
    per_bin = spread(edges, rows)
    busy = rounded(per_bin[:-1] / sizes, DIGITS)  # one rounding for every track
    names = [*unit_rates, *(link_names[link] for link in links)]
    tracks = [{"name": name, "busy": bins} for name, bins in zip(names, busy, strict=True)]
    gbps = rounded(per_bin[-1] / sizes * machine.clock.ghz, 3)
    return {"bin_cycles": width, "bins": len(sizes), "tracks": tracks[:len(unit_rates)],
            "links": tracks[len(unit_rates):], "dram_gb_per_s": gbps}


def busy_start(log: EventLog, units: Units) -> np.ndarray:
    """When each instruction makes its unit busy: its start, or the end of the unit's previous one if
    later (a DMA unit's queued instructions overlap; each counts from where the previous ended)."""
    return np.minimum(np.maximum(log.start, previous_end(log, units)), log.end).astype(np.float64)


def _rows_of(keys: np.ndarray, wanted: list[int]) -> list[np.ndarray]:
    """For each of ``wanted``, the indices where ``keys`` holds it, in index order (one stable sort)."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], wanted, side="left"), np.searchsorted(keys[order], wanted, side="right")
    return [order[lo:hi] for lo, hi in zip(*bounds, strict=True)]


def _unit_rates(log: EventLog, units: Units, begin: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per unit name, in unit order: its instructions and the busy share of each one's busy span."""
    order = np.argsort(units.of, kind="stable")
    bounds = np.searchsorted(units.of[order], np.arange(len(units.names) + 1))
    by_unit = {name: order[bounds[u]:bounds[u + 1]] for u, name in enumerate(units.names)}
    duration = log.end - begin
    stalled = np.zeros(len(duration)) if log.stall_data is None else (log.stall_data + log.stall_room)
    busy = np.divide(duration - stalled, duration, out=np.zeros_like(duration), where=duration > 0)
    order = sorted(by_unit, key=log.unit_names.index)
    return {u: (by_unit[u], busy[by_unit[u]]) for u in order}


def spread(edges: np.ndarray, rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """Per row of intervals ``(a, b, rate)`` and per bin ``[edges[j], edges[j+1])``: the sum over the
    row's intervals of rate x the cycles of ``[a, b)`` inside the bin.

    A row's running total is F(x) = sum_i rate_i * (ramp(x - a_i) - ramp(x - b_i)), a sum of ramps
    starting at the interval ends: with the ends sorted, F(x) = x * W - P, where W and P sum the
    weights and weight x end of the ends at or before x. The rows go together (a report has one per
    unit and link; a row at a time was most of its build), each with its own operations in its own
    order, so each gets the doubles it would alone: each row's ends sorted on their own, stably (the order
    of one stable sort by row, then end, at less than half its cost: the ends lie row by row already);
    each row's sums accumulated on their own; the ends at or before each edge counted with integers."""
    n = np.array([2 * len(a) for a, _, _ in rows], np.int64)
    row = np.repeat(np.arange(len(rows)), n)
    points = np.concatenate([np.zeros(0), *(x for a, b, _ in rows for x in (a, b))])
    weights = np.concatenate([np.zeros(0), *(x for _, _, r in rows for x in (r, -r))])
    first = np.cumsum(n) - n
    bounds = list(zip(first.tolist(), (first + n).tolist(), strict=True))
    order = np.concatenate([np.zeros(0, np.int64),
                            *(np.argsort(points[lo:hi], kind="stable") + lo for lo, hi in bounds)])
    points, weights = points[order], weights[order]
    products = weights * points
    w, p = np.zeros(len(points) + len(rows)), np.zeros(len(points) + len(rows))  # each row: 0, then its sums
    for r, (lo, hi) in enumerate(bounds):
        np.cumsum(weights[lo:hi], out=w[lo + r + 1:hi + r + 1])
        np.cumsum(products[lo:hi], out=p[lo + r + 1:hi + r + 1])
    after = np.searchsorted(edges, points)  # the first edge at or after each end
    counts = np.bincount(row * (len(edges) + 1) + after, minlength=len(rows) * (len(edges) + 1))
    k = np.cumsum(counts.reshape(len(rows), -1), axis=1)[:, :len(edges)] + (first + np.arange(len(rows)))[:, None]
    return np.diff(edges * w[k] - p[k], axis=1)


def rounded(values: np.ndarray, digits: int) -> list:
    """``values`` (of any shape, as nested lists) each ``round(v, digits)``, vectorised: numpy's scaled
    rounding gives the same double except within a hair of a half, where Python rounds the binary value
    exactly; those few are rounded by Python (the per-element loop was most of a report's build time)."""
    scaled = values * 10.0**digits
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    out = np.round(values, digits).tolist()
    for at in np.argwhere(near_half).tolist():
        inner = out
        for i in at[:-1]:
            inner = inner[i]
        inner[at[-1]] = round(float(values[tuple(at)]), digits)
    return out
