"""The plots draw what the report says: bars, steps, image arrays and points read back from the Figure."""

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.patches import StepPatch

from spyre_emu import load, load_machine, run
from spyre_emu.engine.log import EventLog
from spyre_emu.errors import SpyreEmuError
from spyre_emu.results import plots
from spyre_emu.unit_program.model import Instruction
from tests.conftest import ROOT
from tests.results.reports import LINKS, REPORT, TRACKS


def _bars(collection: PolyCollection) -> list[tuple[float, float, float, float]]:
    """(x, width, y, height) of each rectangle (rounded: 0.6 + 0.8 is not 1.4 in floats)."""
    return [tuple(round(float(v), 9) for v in (b.x0, b.width, b.y0, b.height))
            for b in (p.get_extents() for p in collection.get_paths())]


def _ticks(ax) -> list[str]:
    return [t.get_text() for t in ax.get_yticklabels()]


@pytest.mark.parametrize(("kind", "rows"), [("heatmap", TRACKS), ("ring", LINKS)])
def test_busy_maps_show_the_activity_bins(kind, rows):
    ax = plots.KINDS[kind](REPORT).axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), np.array(list(rows.values())))
    assert ax.images[0].get_extent() == [0, 100, len(rows) - 0.5, -0.5]  # four 25-cycle bins, one row each
    assert _ticks(ax) == list(rows)


def test_binned_gantt_fills_each_track_to_its_busy_fraction():
    fig = plots.gantt(REPORT)
    band, ax = fig.axes[:2]
    steps = [p for p in ax.patches if isinstance(p, StepPatch)]
    for row, (step, busy) in enumerate(zip(steps, TRACKS.values(), strict=True)):
        values, edges, baseline = step.get_data()
        np.testing.assert_array_equal(edges, [0, 25, 50, 75, 100])
        assert baseline == row + 0.4
        np.testing.assert_allclose((baseline - values) / 0.8, busy)
    assert [s.get_facecolor() for s in steps][1] != steps[0].get_facecolor()  # pt and load differ
    assert _ticks(ax) == list(TRACKS)
    # kernels on lanes: mm and then copy on the first, add (overlapping mm) on the second, dense on a third
    assert [_bars(c) for c in band.collections] == [[(0, 60, -0.4, 0.8)], [(40, 60, 0.6, 0.8)],
                                                    [(60, 40, -0.4, 0.8)], [(0, 50, 1.6, 0.8)]]


def _log() -> EventLog:
    spans = [(0, "load", 0, 30), (0, "load", 30, 50), (0, "pt0", 40, 90), (1, "sfu1", 60, 100), (-1, "pcie", 0, 10)]
    instructions = [Instruction(core, unit, "op", {}, (), (), f"i{i}") for i, (core, unit, _, _) in enumerate(spans)]
    start = np.array([s for *_, s, _ in spans])
    end = np.array([e for *_, e in spans])
    return EventLog(instructions, start, end, end, np.arange(len(spans)), [], np.zeros((0, 7)), np.zeros((0, 8)),
                    np.zeros((0, 2)), 100)


def test_gantt_from_the_log_draws_one_bar_per_instruction():
    ax = plots.gantt(REPORT, log=_log()).axes[1]
    assert _ticks(ax) == ["core0.load", "core0.pt0", "core1.sfu1", "pcie"]
    assert [_bars(c) for c in ax.collections] == [[(0, 30, -0.4, 0.8), (30, 20, -0.4, 0.8)], [(40, 50, 0.6, 0.8)],
                                                  [(60, 40, 1.6, 0.8)], [(0, 10, 2.6, 0.8)]]


def test_gantt_bins_when_the_log_has_too_many_bars():
    ax = plots.gantt(REPORT, log=_log(), max_bars=4).axes[1]
    assert not ax.collections
    assert len([p for p in ax.patches if isinstance(p, StepPatch)]) == len(TRACKS)


def test_many_tracks_are_labelled_by_core_with_the_units_order():
    units = ["load", "pt0", "sfu0"]
    names = [f"core{c}.{u}" for c in range(32) for u in units]
    report = {**REPORT, "activity": {"bin_cycles": 50, "tracks": [{"name": n, "busy": [1, 0]} for n in names]}}
    ax = plots.heatmap(report).axes[0]
    assert _ticks(ax) == [f"core{c}" for c in range(32)]
    assert list(ax.get_yticks()) == [3 * c + 1 for c in range(32)]  # the middle row of each core
    assert ax.get_ylabel() == "core (rows: load, pt0, sfu0)"


def test_roofline_puts_each_kernel_under_the_roof():
    fig = plots.roofline(REPORT)
    ax = fig.axes[0]
    tera = REPORT["clock_ghz"] / 1000
    roof = ax.lines[0].get_xydata()
    ridge = 1000.0 / 10.0  # peak flops / peak bytes per cycle
    assert roof[1].tolist() == [ridge, 1000.0 * tera]
    np.testing.assert_allclose(roof[:, 1], np.minimum(roof[:, 0] * 10.0, 1000.0) * tera)
    points = {tuple(xy) for c in ax.collections for xy in c.get_offsets()}
    assert points == {(10.0, 100.0 * tera), (50 / 300, 0.8 * tera), (500.0, 1000.0 * tera)}
    assert [t.get_text() for t in ax.texts] == ["mm", "add", "dense"]
    assert "1 kernel(s) without flops or DRAM bytes not drawn" in fig.get_suptitle()


def test_roofline_takes_its_peaks_from_a_machine():
    machine = load_machine()
    roof = plots.roofline(REPORT, machine=machine).axes[0].lines[0].get_xydata()
    peak = 2 * machine.cores.count * machine.cores.corelets * machine.pt.macs_per_cycle("fp16")
    assert roof[1].tolist() == [peak / machine.dram.peak_bytes_per_cycle(), peak * REPORT["clock_ghz"] / 1000]


@pytest.mark.parametrize(("kind", "missing"), [("heatmap", "activity"), ("ring", "activity"), ("gantt", "activity"),
                                               ("roofline", "machine")])
def test_a_report_without_the_section_is_refused_by_name(kind, missing):
    report = {k: v for k, v in REPORT.items() if k != missing}
    with pytest.raises(SpyreEmuError, match=f"^{missing}: missing"):
        plots.KINDS[kind](report)


def test_ragged_activity_is_refused():
    ragged = [{"name": "a", "busy": [1]}, {"name": "b", "busy": []}]
    report = {**REPORT, "activity": {"bin_cycles": 25, "tracks": ragged}}
    with pytest.raises(SpyreEmuError, match="^activity.tracks: expected"):
        plots.heatmap(report)


def test_every_ring_link_is_named():
    names = [f"core{c}->core{c + 1}" for c in range(74)]
    report = {**REPORT, "activity": {"bin_cycles": 50, "links": [{"name": n, "busy": [0, 1]} for n in names]}}
    assert _ticks(plots.ring(report).axes[0]) == names


def test_a_simulated_report_draws_its_kernels_and_bins(spyre):
    report = run(load(ROOT / "examples" / "programs" / "softmax_lx_kernels.json", spyre), spyre).report
    data = report.data
    band, ax = plots.gantt(report).axes[:2]
    assert [_bars(c)[0][:2] for c in band.collections] == [(k["start_cycle"], k["end_cycle"] - k["start_cycle"])
                                                           for k in data["kernels"]]
    assert len([p for p in ax.patches if isinstance(p, StepPatch)]) == len(data["activity"]["tracks"])
    for kind, rows in (("heatmap", "tracks"), ("ring", "links")):
        image = plots.KINDS[kind](report).axes[0].images[0]
        np.testing.assert_array_equal(image.get_array(), [row["busy"] for row in data["activity"][rows]])
    tera = data["clock_ghz"] / 1000
    points = {tuple(xy) for c in plots.roofline(report).axes[0].collections for xy in c.get_offsets()}
    assert points == {(k["roofline"]["intensity"], k["roofline"]["attained_flops_per_cycle"] * tera)
                      for k in data["kernels"] if k["roofline"]["flops"] and k["roofline"]["bytes"]}
