"""Per-kernel report figures: exact on a hand-timed program, and adding up on every example."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from spyre_emu.engine.log import UNIT_STATS
from spyre_emu.pipeline import run
from spyre_emu.results import build_report, traffic
from spyre_emu.results.activity import rounded, spread
from spyre_emu.results.traffic import trace_traffic
from spyre_emu.unit_program import parse_unit_program
from spyre_emu.unit_program.model import dram_pieces
from tests.conftest import program
from tests.results.runs import MACHINE, STEMS, example

# Core 0: pt0 runs one pass (kernel mm), then signals sfu0's exp and lx2fifo1. sfu0 runs relu, then
# waits for the pass (kernel act); sfu1 streams 4 sticks from its FIFO, which lx2fifo1 fills only
# after the pass (kernel stream).
HAND = program({0: {
    "pt0": [{"op": "matmul", "a": 0, "b": 8192, "c": 16384, "rows": 8, "k": 64, "signal": ["t1", "t2"],
             "kernel": "mm"}],
    "sfu0": [{"op": "relu", "a": 32768, "out": 36864, "sticks": 4, "kernel": "act"},
             {"op": "exp", "a": 32768, "out": 36864, "sticks": 8, "wait": ["t1"], "kernel": "act"}],
    "lx2fifo1": [{"op": "lx2fifo", "lx": 40960, "bytes": 512, "wait": ["t2"], "kernel": "stream"}],
    "sfu1": [{"op": "relu", "a": "fifo", "out": 45056, "sticks": 4, "kernel": "stream"}],
}})


def _hand() -> dict:
    return run(parse_unit_program(HAND, MACHINE, "hand.json"), MACHINE).report.data


def _unit(kernel: dict, name: str) -> tuple:
    row = next(r for r in kernel["per_unit"] if r["unit"] == name)
    return row["busy_cycles"], row["stall_cycles"], row["idle_cycles"]


def test_hand_timed_kernels():
    mm, stream, act = _hand()["kernels"]  # by start, then end: 0..80, 0..149, 0..212
    # The pass: fill 8 + max(8 x 64 x 64 MACs / 512 per cycle, 64 B sticks) + drain 8 = 80 cycles.
    assert (mm["name"], mm["start_cycle"], mm["end_cycle"], mm["macs"]) == ("mm", 0, 80, 32768)
    assert _unit(mm, "core0.pt0") == (80, {"token": 0, "data": 0, "room": 0}, 0)
    # Ideal: 64 cycles of one array's work over the core's two arrays = 32; PT utilization 32 / 80.
    assert mm["ideal_cycles_by"] == {"pt": 32, "sfu": 0, "dram": 0}
    assert mm["pt_utilization"] == 0.4
    # relu: latency 4 + 4 sticks x 16 = 68 cycles; exp waits for the pass (68..80), then 4 + 8 x 16 = 132.
    assert (act["name"], act["end_cycle"]) == ("act", 212)
    assert _unit(act, "core0.sfu0") == (68 + 132, {"token": 80 - 68, "data": 0, "room": 0}, 0)
    assert act["ideal_cycles_by"]["sfu"] == (4 * 16 + 8 * 16) // 2  # stick-cycles over the core's two SFUs
    # lx2fifo1 waits for the pass (0..80), pushes at 80..83, visible a cycle later, ends at 84.
    # sfu1 waits for data from 0 to 81, steps at 81, 97, 113, 129 (one a stick's 16 cycles), ends 16 + 4
    # cycles after its last step: 149.
    assert (stream["name"], stream["end_cycle"], stream["exec_start_cycle"]) == ("stream", 149, 0)
    assert _unit(stream, "core0.lx2fifo1") == (4, {"token": 80, "data": 0, "room": 0}, 149 - 84)
    assert _unit(stream, "core0.sfu1") == (149 - 81, {"token": 0, "data": 81, "room": 0}, 0)
    assert stream["units"]["sfu"] == {"units_used": 1, "busy_cycles": 68, "stall_cycles": {"token": 0, "data": 81,
                                                                                           "room": 0}, "idle_cycles": 0}


def test_spread_is_exact_on_bins():
    edges = np.array([0.0, 10.0, 20.0, 30.0])
    got = spread(edges, [(np.array([5.0, 0.0]), np.array([25.0, 30.0]), np.array([1.0, 0.5]))])
    np.testing.assert_allclose(got, [[5 + 5, 10 + 5, 5 + 5]])


def test_rows_spread_together_give_each_row_its_own_doubles():
    """Every row at once gives, bit for bit, what the row gives alone (its sums in its own order): rows
    of different lengths, empty ones, ends tied within a row and on the edges, uneven rates."""
    rng = np.random.default_rng(7)
    edges = np.minimum(np.arange(0, 1040, 40), 1003).astype(np.float64)
    rows = []
    for size in (0, 1, 5, 300, 0, 2, 40):
        a = rng.integers(0, 1003, size).astype(np.float64)
        b = np.minimum(a + rng.integers(0, 200, size), 1003)
        rows.append((a, b, rng.random(size) * rng.choice([1e-3, 1.0, 7e3], size)))
    together = spread(edges, rows)
    for r, one in enumerate(rows):
        assert together[r].tobytes() == _spread_alone(edges, *one).tobytes()


def _spread_alone(edges: np.ndarray, a: np.ndarray, b: np.ndarray, rate: np.ndarray) -> np.ndarray:
    """One row as the report spread it before the rows went together (session 41)."""
    points, weights = np.concatenate([a, b]), np.concatenate([rate, -rate])
    order = np.argsort(points, kind="stable")
    points, weights = points[order], weights[order]
    w = np.concatenate([[0.0], np.cumsum(weights)])
    p = np.concatenate([[0.0], np.cumsum(weights * points)])
    k = np.searchsorted(points, edges, side="right")
    return np.diff(edges * w[k] - p[k])


def test_rounded_is_python_round():
    """The vectorised rounding of the activity bins gives Python's round, halves included (0.00005
    is a hair above a half in binary: Python rounds it up, numpy's scaled rounding down)."""
    rng = np.random.default_rng(3)
    halves = (np.arange(20000) + 0.5) / 1e4
    for values in (rng.random(20000), rng.random(20000) * 1e3, halves, np.arange(1000) / 2000):
        for digits in (3, 4):
            assert rounded(values, digits) == [round(float(v), digits) for v in values]
    assert rounded(np.array([5e-5]), 4) == [1e-4]
    grid = rng.random((7, 300)) * np.array([1.0, 1e3, 1e-2, 1.0, 1.0, 1.0, 1.0])[:, None]
    grid[3] = halves[:300]
    assert rounded(grid, 4) == [[round(float(v), 4) for v in row] for row in grid]


@pytest.mark.parametrize("stem", STEMS)
def test_traffic_in_batches_of_dmas_is_the_same(stem, monkeypatch):
    """Sticks per channel counted a few DMAs at a time (bounded memory) give the engine's link counts."""
    log = example(stem).log
    monkeypatch.setattr(traffic, "CHUNK_STICKS", 3)
    assert np.array_equal(trace_traffic(log, MACHINE).per_link(len(log.link_stats)), log.link_stats[:, 0])


def test_report_per_distinct_instruction_is_the_report_per_instruction():
    """The report works each figure out once per distinct (core, unit, op, args dict): with every instruction
    given its own copy of its args (nothing shared, so every instruction distinct) it is the same report."""
    shared = 0
    for stem in STEMS:
        result = example(stem)
        log = result.log
        copies = tuple(replace(ins, args=dict(ins.args)) for ins in log.instructions)
        shared += len({id(ins.args) for ins in log.instructions}) < len(copies)
        alone = build_report(replace(log, instructions=copies), MACHINE, result.report.data["program"],
                             {k["name"]: k["op"] for k in result.report.data["kernels"]})
        assert alone.to_json() == result.report.to_json(), stem
    assert shared >= len(STEMS) // 2  # most examples share args dicts, so the test compares two ways


def test_sticks_per_channel_counted_by_line_are_counted_by_stick():
    """channel_sticks counts the sticks of each interleave line at once: the same as every stick's own
    channel, on random transfers (strided or not, starting anywhere in a line, a stick to many lines)."""
    rng = np.random.default_rng(5)
    geometry = traffic._Geometry(MACHINE)
    line = MACHINE.dram.interleave_bytes
    dmas = []
    for _ in range(300):
        piece = int(rng.integers(1, 3 * line // 128 + 2)) * 128
        count = int(rng.integers(1, 5))
        a = {"dram": int(rng.integers(0, 1 << 20)) * 128, "bytes": piece * count}
        if count > 1 or rng.random() < 0.3:
            a.update(piece=piece, stride=piece + int(rng.integers(0, 40)) * 128)
        dmas.append(a)
    for a, got in zip(dmas, geometry.channel_sticks(dmas), strict=True):
        addrs = [addr + i * 128 for addr, nbytes in dram_pieces(a) for i in range(nbytes // 128)]
        want = np.bincount(MACHINE.dram.channel_of(np.array(addrs)), minlength=MACHINE.dram.channels)
        assert got == tuple((c, int(k)) for c, k in enumerate(want) if k), a


@pytest.mark.parametrize("stem", STEMS)
def test_figures_add_up(stem):
    result = example(stem)
    data, log = result.report.data, result.log
    for k in data["kernels"]:
        for row in k["per_unit"]:
            assert row["idle_cycles"] >= 0
            assert row["busy_cycles"] + sum(row["stall_cycles"].values()) + row["idle_cycles"] == k["cycles"]
        for agg in k["units"].values():
            assert agg["busy_cycles"] + sum(agg["stall_cycles"].values()) + agg["idle_cycles"] == \
                k["cycles"] * agg["units_used"]
    # Busy and FIFO stall cycles of all kernels are the engine's own per-unit counters.
    stats = {name: dict(zip(UNIT_STATS, row, strict=True)) for name, row in zip(log.unit_names, log.unit_stats,
                                                                                  strict=True)}
    rows = [r for k in data["kernels"] for r in k["per_unit"]]
    for unit in {r["unit"] for r in rows}:
        mine = [r for r in rows if r["unit"] == unit]
        assert sum(r["busy_cycles"] for r in mine) == stats[unit]["busy_cycles"]
        assert sum(r["stall_cycles"]["data"] for r in mine) == stats[unit]["stall_data_cycles"]
        assert sum(r["stall_cycles"]["room"] for r in mine) == stats[unit]["stall_room_cycles"]
        assert sum(r["stall_cycles"]["token"] for r in mine) <= stats[unit]["stall_token_cycles"]  # within spans
    # Bytes: per link as the engine counted, and the kernels' bytes sum to what the program moved.
    assert np.array_equal(trace_traffic(log, MACHINE).per_link(len(log.link_stats)), log.link_stats[:, 0])
    assert sum(k["bytes"]["ring"] for k in data["kernels"]) == data["ring"]["stick_hops"] * 128
    assert sum(k["bytes"]["dram_read"] for k in data["kernels"]) == data["dram"]["read_bytes"]
    assert sum(k["bytes"]["dram_write"] for k in data["kernels"]) == data["dram"]["write_bytes"]
    _activity_adds_up(data, stats)


def _activity_adds_up(data: dict, stats: dict) -> None:
    act = data["activity"]
    assert data["total_cycles"] == data["launch_cycles"] + data["card_cycles"]
    sizes = np.diff(np.minimum(np.arange(act["bins"] + 1) * act["bin_cycles"], data["card_cycles"]))
    assert act["bins"] <= 400
    assert sizes.sum() == data["card_cycles"]
    assert (sizes > 0).all()
    slack = act["bins"] * act["bin_cycles"] * 0.5e-4 + 1e-6  # fractions are rounded to 4 digits
    for track in act["tracks"]:
        assert abs(np.dot(track["busy"], sizes) - stats[track["name"]]["busy_cycles"]) <= slack
    for link in act["links"]:
        sticks = next(lk["sticks"] for lk in data["ring"]["links"] if lk["link"] == link["name"])
        assert abs(np.dot(link["busy"], sizes) - sticks) <= slack
    moved = data["dram"]["read_bytes"] + data["dram"]["write_bytes"]
    assert abs(np.dot(act["dram_gb_per_s"], sizes) / data["clock_ghz"] - moved) <= act["bins"] * 5e-4 * act[
        "bin_cycles"] / data["clock_ghz"] + 1e-6
