"""The trace: the analyzer's dialect (kernel events, TS1..TS5, the enclosing host event), unit tracks
and their lanes, counters, exact timestamps, Perfetto's rules on every example."""

from __future__ import annotations

import json
import math

import pytest

from spyre_emu.pipeline import run
from spyre_emu.results import chrome_trace, ideal_cycles_files
from spyre_emu.results.chrome import lanes, truncates_right
from spyre_emu.unit_program import parse_unit_program
from tests.conftest import program
from tests.host.perfetto import problems
from tests.results.runs import MACHINE, STEMS, example
from tests.results.test_report import HAND


def _hand_trace() -> dict:
    result = run(parse_unit_program(HAND, MACHINE, "hand.json"), MACHINE)
    return json.loads(chrome_trace(result.log, MACHINE, result.report.data))


def test_kernel_events_in_the_analyzers_dialect():
    trace = _hand_trace()
    assert trace["deviceProperties"][0]["id"] == 0
    events = trace["traceEvents"]
    assert all("ts" in e for e in events if e["ph"] == "M")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    # mm 0..80, stream 0..149, act 0..212 all overlap: one stream each. TS are 1000 MHz SoC counts of
    # the start, compute start (twice: no prep phase), compute end and end, in 1100 MHz cycles.
    assert [(e["name"], e["tid"], e["args"]["stream"]) for e in kernels] == [
        ("mm Cmpt Exec", 1, 1), ("stream Cmpt Exec", 2, 2), ("act Cmpt Exec", 3, 3)]
    assert [[e["args"][f"TS{n}"] for n in range(1, 6)] for e in kernels] == [
        ["0", "0", "0", "72", "72"], ["0", "0", "0", "135", "135"], ["0", "0", "0", "192", "192"]]
    assert [(e["ts"], e["dur"]) for e in kernels] == [(0.0, 0.0727), (0.0, 0.1355), (0.0, 0.1927)]
    assert {e["args"]["correlation"] for e in kernels} == {1}
    (host,) = [e for e in events if e["name"] == "aiuScheduleWait"]
    assert (host["pid"], host["args"]["correlation"], host["ts"], host["dur"]) == (1, 1, 0.0, 0.1927)


def test_unit_tracks_and_counters():
    events = _hand_trace()["traceEvents"]
    units = [e for e in events if e.get("cat") == "unit"]
    # core 0's tracks (pid 100), its units in engine order, tids 100 x 1000 + track
    assert [(e["pid"], e["tid"], e["name"], e["args"]["start_cycle"], e["args"]["end_cycle"]) for e in units] == [
        (100, 100_000, "matmul", 0, 80), (100, 100_001, "relu", 0, 68), (100, 100_001, "exp", 80, 212),
        (100, 100_002, "lx2fifo", 80, 84), (100, 100_003, "relu", 0, 149)]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert [names[t] for t in range(100_000, 100_004)] == ["pt0", "sfu0", "lx2fifo1", "sfu1"]
    pt = [e for e in events if e["ph"] == "C" and e["name"] == "PT busy"]
    # one array of the card's 64 is busy for the first 80 of 212 cycles (one-cycle bins), then none
    assert [(e["ts"], e["args"]["busy"]) for e in pt] == [(0.0, round(1 / 64, 4)), (0.0727, 0.0), (0.1927, 0.0)]


def test_every_track_ends_before_its_next_event_starts():
    """The analyzer rejects partial overlaps on a track after rounding ends to 4 decimals."""
    events = json.loads(chrome_trace(example("softmax_lx_kernels").log, MACHINE,
                                     example("softmax_lx_kernels").report.data))["traceEvents"]
    tracks: dict = {}
    for e in (e for e in events if e["ph"] == "X"):
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for spans in tracks.values():
        spans.sort(key=lambda e: e["ts"])
        for a, b in zip(spans, spans[1:], strict=False):
            assert round(a["ts"] + a["dur"], 4) <= b["ts"], (a, b)


def test_times_read_as_the_ns_they_mean():
    """Perfetto reads µs as whole ns, truncated: 8.04 is stored as 8.03999..., read 8039 ns, so the
    slice from 7.92 for 0.12 (ending at 8040) would overlap the next one. The exported time is the next
    float up, which reads 8040 and still rounds to 8.04; 7.92 and 0.12 read right as they are."""
    assert truncates_right(8.04) == math.nextafter(8.04, math.inf)
    assert (int(truncates_right(8.04) * 1000), round(truncates_right(8.04), 4)) == (8040, 8.04)
    assert (truncates_right(7.92), truncates_right(0.12)) == (7.92, 0.12)


def test_lanes_by_hand():
    """Each span takes the lowest lane free at its start: [5, 8) overlaps [0, 10); [8, 12) starts as
    [5, 8) ends; [10, 20) as [0, 10) does; [11, 13) overlaps both."""
    assert lanes([(0, 10), (5, 8), (8, 12), (10, 20), (11, 13)]) == [0, 1, 1, 0, 2]


def test_a_units_overlapping_instructions_go_on_lanes_that_perfetto_reads():
    """Core 0's load unit issues its second load before the first ends: the second goes on a lane of its
    own ("load #2", the next tid), so no track's slices overlap and no tid is used by two processes."""
    two = program({0: {"load": [{"op": "load", "dram": "x", "lx": 0, "bytes": 4096},
                                {"op": "load", "dram": "x", "lx": 8192, "bytes": 4096}]}}, {"x": {"bytes": 4096}})
    result = run(parse_unit_program(two, MACHINE, "two.json"), MACHINE)
    events = json.loads(chrome_trace(result.log, MACHINE, result.report.data))["traceEvents"]
    (first, second) = [e for e in events if e.get("cat") == "unit"]
    assert first["args"]["start_cycle"] < second["args"]["start_cycle"] < first["args"]["end_cycle"]
    names = {e["tid"]: e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert (names[first["tid"]], names[second["tid"]], second["tid"] - first["tid"]) == ("load", "load #2", 1)
    assert problems(events) == []


@pytest.mark.parametrize("stem", STEMS)
def test_every_example_keeps_perfettos_rules(stem):
    """The card's timeline, as `spyre-emu run --trace` writes it: slices nest on every track (the DMA
    units' overlapping descriptors on lanes), tids unique across processes (cores, host, ring, card)."""
    result = example(stem)
    assert problems(json.loads(chrome_trace(result.log, MACHINE, result.report.data))["traceEvents"]) == []


def test_ideal_cycles_files():
    kernels = example("mlp_gelu_kernels").report.data["kernels"]
    files = ideal_cycles_files(kernels)
    assert sorted(files) == [f"inductor-spyre/{k}/perf/ideal_cycles.json" for k in ("bias", "gelu", "matmul")]
    matmul = next(k for k in kernels if k["name"] == "matmul")
    assert json.loads(files["inductor-spyre/matmul/perf/ideal_cycles.json"]) == [
        {"ideal_cycles": matmul["ideal_cycles_by"]["pt"], "op_category": "matmul"}]
