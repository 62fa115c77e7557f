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
    sizes = np.diff(edges)
    start, end = log.start.astype(np.float64), log.end.astype(np.float64)
    begin = busy_start(log, units)
    tracks = [{"name": name, "busy": _fractions(spread(edges, begin[i], end[i], rate), sizes)}
              for name, (i, rate) in _unit_rates(log, units, begin).items()]
    links = []
    for link in sorted(link_names):
        rows = traffic.link == link
        ins = traffic.link_ins[rows]
        rate = traffic.link_sticks[rows] / np.maximum(end[ins] - start[ins], 1)
        links.append({"name": link_names[link], "busy": _fractions(spread(edges, start[ins], end[ins], rate), sizes)})
    dram = traffic.dram_read + traffic.dram_write
    moving = dram > 0
    per_bin = spread(edges, start[moving], end[moving], dram[moving] / np.maximum(end - start, 1)[moving])
    gbps = rounded(per_bin / np.maximum(sizes, 1) * machine.clock.ghz, 3)
    return {"bin_cycles": width, "bins": len(sizes), "tracks": tracks, "links": links, "dram_gb_per_s": gbps}


def busy_start(log: EventLog, units: Units) -> np.ndarray:
    """When each instruction makes its unit busy: its start, or the end of the unit's previous one if
    later (a DMA unit's queued instructions overlap; each counts from where the previous ended)."""
    return np.minimum(np.maximum(log.start, previous_end(log, units)), log.end).astype(np.float64)


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


def spread(edges: np.ndarray, a: np.ndarray, b: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """Per bin ``[edges[j], edges[j+1])``: the sum over intervals of rate x the cycles of
    ``[a, b)`` inside the bin.

    The running total is F(x) = sum_i rate_i * (ramp(x - a_i) - ramp(x - b_i)), a sum of ramps
    starting at the interval ends: with the ends sorted, F(x) = x * W - P, where W and P sum the
    weights and weight x end of the ends at or before x. One sort for all intervals.
    """
    points = np.concatenate([a, b])
    weights = np.concatenate([rate, -rate])
    order = np.argsort(points, kind="stable")
    points, weights = points[order], weights[order]
    w = np.concatenate([[0.0], np.cumsum(weights)])
    p = np.concatenate([[0.0], np.cumsum(weights * points)])
    k = np.searchsorted(points, edges, side="right")
    return np.diff(edges * w[k] - p[k])


def _fractions(amounts: np.ndarray, sizes: np.ndarray) -> list[float]:
    return rounded(amounts / np.maximum(sizes, 1), DIGITS)


def rounded(values: np.ndarray, digits: int) -> list[float]:
    """``[round(v, digits) for v in values]``, vectorised: numpy's scaled rounding gives the same
    double except within a hair of a half, where Python rounds the binary value exactly; those few
    are rounded by Python (the per-element loop was most of a report's build time)."""
    scaled = values * 10.0**digits
    near_half = np.abs(scaled - np.floor(scaled) - 0.5) < 1e-6
    out = np.round(values, digits).tolist()
    for i in np.flatnonzero(near_half):
        out[i] = round(float(values[i]), digits)
    return out
