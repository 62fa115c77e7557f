"""Single figures (measurements.json entries) the calibration data does not hold, as validate would read them
from another folder: a matmul is known by the shape its ``what`` states whatever its name, a ring move by
the bytes it states, an SFU kernel by its op, size and cores, a figure measured two ways (an old and a new
division) as two cases and their ratio, and an entry validate has no program for is listed as not run, never
dropped unseen."""

import pytest

from spyre_emu.cli import main
from spyre_emu.errors import SpyreEmuError
from spyre_emu.pipeline import load, parse, run
from spyre_emu.validation.calibration import QUOTED, SINGLE, SWEEP, load_cases, unpublished_split
from spyre_emu.validation.cases import counted, run_cases
from spyre_emu.validation.measurements import _tiled
from spyre_emu.validation.workloads import (
    matmul_program,
    pointwise_program,
    ring_scatter_program,
    ring_shift_program,
    softmax_tile_program,
)
from tests.conftest import ROOT, calibration_folder

ROW = ("llama8b_kv", "decode", 1, 8, 1024, 4096, (1, 1, 16, 2))


def _cases(tmp_path, singles):
    return {c.name: c for c in load_cases(calibration_folder(tmp_path, [ROW], singles))[0]}


def test_a_matmul_is_known_by_its_shape_whatever_its_name(tmp_path):
    cases = _cases(tmp_path, [
        {"name": "kv_decode", "what": "matmul [64, 4096] x [4096, 1024]", "device_us": 60.5,
         "split": {"b": 1, "m": 8, "n": 4, "k": 1}},
        {"name": "attn_scores", "what": "bmm [32,64,128] @ [32,128,2048], prefill", "device_us": 80.0,
         "split": {"b": 8, "m": 4, "n": 1, "k": 1}}])
    assert cases["kv_decode"].program == matmul_program(1, 64, 1024, 4096, (1, 8, 4, 1))
    assert cases["kv_decode"].category == "matmul decode (single)"
    assert cases["attn_scores"].program == matmul_program(32, 64, 2048, 128, (8, 4, 1, 1))
    assert cases["attn_scores"].category == "bmm prefill (single)"


def test_a_split_stated_in_words_is_the_one_run(tmp_path):
    """With no ``split``, the division ``what`` states after "split" or "division" (as issue 12 and validate's own
    tables write them); a dim it leaves out is not split; text that states none keeps the unpublished rule."""
    cases = _cases(tmp_path, [
        {"name": "kv", "what": "K/V decode [64, 4096] × [4096, 1024] with split m=8, n=4", "device_us": 60.5},
        {"name": "av", "what": "attn@V [32,64,576] x [32,576,128], division (b, m, n, k) = (2, 8, 2, 1)",
         "device_us": 59.7},
        {"name": "own", "what": "matmul [1,512,4096] x [4096,4096], its own split", "device_us": 358.0}])
    assert cases["kv"].split == (1, 8, 4, 1)
    assert cases["av"].split == (2, 8, 2, 1)
    assert cases["own"].split == (1, 4, 8, 1)


def test_a_design_row_written_as_a_single_figure_runs_as_validate_runs_it(tmp_path, monkeypatch, spyre):
    """DESIGN.md's decode rows as their source words them: a 3-D input times a 2-D weight is a linear layer over
    B × M rows, and the cores stated (25) take the division that fits them (the 400 column sticks, 16 each),
    which is validate's own program for the row (examples/programs/calibration): the same simulated time."""
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    cases = _cases(tmp_path, [
        {"name": "d1", "what": "decode matmul [1,1,4096]×[4096,25600], 25 cores", "device_us": 1762.0},
        {"name": "d4", "what": "decode matmul [4,1,4096]×[4096,25600], 32 cores", "device_us": 1389.0}])
    assert cases["d1"].split == (1, 1, 25, 1)
    assert cases["d4"].program["kernels"][0]["dims"] == {"mb": 4, "out": 25600, "in": 4096}
    (point,), _ = run_cases(spyre, [cases["d1"]])
    own = run(load(ROOT / "examples/programs/calibration/decode_1x4096x25600_25cores.json", spyre), spyre).report
    assert point.simulated == pytest.approx(own.data["latency_us"], abs=1e-5)


def test_anunpublished_split_is_the_tuned_one_or_the_least_loading():
    """(4, 8) where the shape takes it evenly; else, for [4, 64, 128] x [4, 128, 128] (N and K 2 sticks), the
    even divisions of 32 and a core's elements read and written, (B/b)(M/m K + K N/n + M/m N/n):
    (1,16,2) 35,840; (1,32,1) 67,584; (2,8,2) 19,456; (2,16,1) 34,816; (4,4,2) 11,264; (4,8,1) 18,432."""
    assert unpublished_split(1, 512, 4096, 4096) == (1, 4, 8, 1)
    assert unpublished_split(1, 1, 4096, 4096) == (1, 1, 32, 1)  # one row: only N can take 32
    assert unpublished_split(4, 64, 128, 128) == (4, 4, 2, 1)
    assert unpublished_split(1, 1, 25600, 4096) == (1, 1, 32, 1)  # none even: 400 sticks cut 13 or 12 (uneven)
    assert unpublished_split(1, 1, 25600, 4096, cores=25) == (1, 1, 25, 1)
    assert unpublished_split(2, 8, 64, 64) == (1, 4, 8, 1)  # no division of 32 fits: validate reports its problem


def test_a_ring_move_is_known_by_the_bytes_it_states(tmp_path):
    cases = _cases(tmp_path, [
        {"name": "ring_shift_1m", "what": "same, 1048576 B per core", "device_us": 200.0},
        {"name": "scatter_16", "what": "LX to LX all-to-all scatter across 16 cores over the ring, 3276800 B per "
                                       "move", "device_us": 100.0},
        {"name": "ring_shift_x", "what": "a shift of half of LX", "device_us": 90.0}])
    assert cases["ring_shift_1m"].program == ring_shift_program(1048576, 32)
    assert cases["scatter_16"].program == ring_scatter_program(3276800, 16)
    assert cases["scatter_16"].category == "ring"
    assert cases["ring_shift_x"].problem == "expected the bytes moved in `what` (as in '131072 B per core')"


def test_an_entry_without_a_program_is_listed_not_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "1")
    data = calibration_folder(tmp_path, [ROW], [{"name": "softmax_x", "what": "softmax of 512 rows",
                                                 "device_us": 20.0}])
    out = tmp_path / "v.md"
    assert main(["validate", "--data", str(data), "--out", str(out), "--quiet", "--only", "llama8b",
                 "--only", "softmax_x"]) == 2
    assert "## Cases not run (1)" in out.read_text()
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("spyre-emu: error:")]
    assert errors == [f"spyre-emu: error: {data / SINGLE} cases[softmax_x]: no program for this figure: its "
                      "`what` states no matmul shape ([M,K] x [K,N]), SwiGLU MLP, ring shift or scatter, softmax "
                      "chain, pointwise op or row reduction (as in 'neg of 8192×2048, 1 core'); whole calls are run by "
                      "name (launch_phases_mean, sdpa_encoder_b1, block_granite_prefill, swiglu_granite_prefill)"]


def test_a_whole_call_in_the_file_replaces_the_quoted_one(tmp_path):
    """The SwiGLU figure quoted from the issue is a range; the file's own entry, a range or one value, wins."""
    assert load_cases(calibration_folder(tmp_path, [ROW]))[1]["swiglu_granite_prefill"] == QUOTED[
        "swiglu_granite_prefill"]
    entry = {"name": "swiglu_granite_prefill", "what": "a SwiGLU MLP", "pt_util_pct": 71.5}
    calls = load_cases(calibration_folder(tmp_path, [ROW], [entry]))[1]
    assert calls["swiglu_granite_prefill"]["pt_util_pct"] == {"low": 71.5, "high": 71.5}


def test_a_folder_may_hold_either_file(tmp_path, capsys):
    """Only the sweep, or only the single figures, is data too; a folder with neither is one line, exit 2."""
    data = calibration_folder(tmp_path, [ROW], [{"name": "ring_shift_1m", "what": "1048576 B per core",
                                                 "device_us": 200.0}])
    (data / SINGLE).unlink()
    assert [c.name for c in load_cases(data)[0]] == ["llama8b_kv_decode_1x1x16x2"]
    calibration_folder(data, [ROW], [{"name": "ring_shift_1m", "what": "1048576 B per core", "device_us": 200.0}])
    (data / SWEEP).unlink()
    assert [c.name for c in load_cases(data)[0]] == ["ring_shift_1m"]
    (data / SINGLE).unlink()
    assert main(["validate", "--data", str(data), "--out", str(tmp_path / "v.md"), "--only", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spyre-emu: error: {data}: expected a folder holding {SWEEP}, {SINGLE} or both"]
    assert not (tmp_path / "v.md").exists()


def test_data_may_be_one_file_under_any_name(tmp_path, capsys):
    """A sweep (.csv) or single figures (.json) named as their keeper named them are read as the folder's would
    be; any other file is one line, exit 2, nothing written."""
    single = {"name": "ring_shift_1m", "what": "1048576 B per core", "device_us": 200.0}
    data = calibration_folder(tmp_path, [ROW], [single])
    sweep, singles = (data / SWEEP).rename(tmp_path / "kept_apart.csv"), (data / SINGLE).rename(tmp_path / "x.json")
    assert [c.name for c in load_cases(sweep)[0]] == ["llama8b_kv_decode_1x1x16x2"]
    assert [c.name for c in load_cases(singles)[0]] == ["ring_shift_1m"]
    other = tmp_path / "notes.txt"
    other.write_text("")
    assert main(["validate", "--data", str(other), "--out", str(tmp_path / "v.md"), "--only", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spyre-emu: error: {other}: expected a folder holding {SWEEP}, {SINGLE} or both, or a .csv sweep or .json "
        "of single figures"]
    assert main(["validate", "--data", str(sweep), "--out", str(sweep), "--only", "x"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"spyre-emu: error: {sweep}: --out: is also --data's sweep; give --out another file"]
    assert not (tmp_path / "v.md").exists()


def test_an_sfu_kernel_is_known_by_its_op_size_and_cores(tmp_path):
    """In the words of torch-spyre's cost-model sweep (validate's own rows), or where ``what`` says nothing, by
    the sweep's names; a softmax chain is one row tile of 256 rows (2048 rows: 8) unless ``what`` states the
    tiles, with its chain's length less the five base ops as sigmoid stages."""
    cases = _cases(tmp_path, [
        {"name": "a", "what": "silu of 2048×8192, 2 cores", "device_us": 9.0},
        {"name": "b", "what": "mul of two 1024x512, 1 core", "device_us": 9.0},
        {"name": "c", "what": "min along the row of 4096×2048, 4 cores", "device_us": 9.0},
        {"name": "d", "what": "softmax 1024×512 in 2 LX tiles, chain of 7 (2 sigmoid stages added), 4 cores",
         "device_us": 9.0},
        {"name": "softmax_stages_9_1core", "device_us": 9.0},
        {"name": "rowmax_2048x8192_4core", "device_us": 9.0},
        {"name": "gelu_2048x4096_32cores", "device_us": 9.0},
        {"name": "e", "what": "softmax 2048×512, chain of 3, 1 core", "device_us": 9.0},
        {"name": "rowneg_64x64_1core", "what": "", "device_us": 9.0}])
    assert cases["a"].program == pointwise_program("silu", 2048, 8192, 2, "a")
    assert cases["a"].category == "pointwise (single)"
    assert cases["b"].program == pointwise_program("mul", 1024, 512, 1, "b", arity=2)
    assert cases["c"].program == pointwise_program("min", 4096, 2048, 4, "c")
    assert cases["c"].category == "row reduction (single)"
    assert (cases["d"].program, cases["d"].tiles) == (softmax_tile_program(2, 4, "d", 512, 512), 2)
    stages = cases["softmax_stages_9_1core"]
    assert (stages.program, stages.tiles) == (softmax_tile_program(4, 1, "softmax_stages_9_1core", 256, 512), 8)
    assert cases["rowmax_2048x8192_4core"].program == pointwise_program("max", 2048, 8192, 4,
                                                                        "rowmax_2048x8192_4core")
    assert cases["gelu_2048x4096_32cores"].program == pointwise_program("gelufwd", 2048, 4096, 32,
                                                                        "gelu_2048x4096_32cores")
    assert cases["e"].problem == "a softmax chain has at least 5 ops (max, sub, exp, sum, div)"
    assert cases["rowneg_64x64_1core"].problem.startswith("no program for this figure")


def test_a_tiled_figure_times_as_validates_own_row(tmp_path, monkeypatch, spyre):
    """stages_5_1 as the sweep names it gives the figure of validate's own softmax_stages row: one launch, then
    the one-tile program (examples/programs/calibration/softmax_stages_5_1core.json) 8 times."""
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    case = _cases(tmp_path, [{"name": "stages_5_1", "device_us": 591.0}])["stages_5_1"]
    (point,), _ = run_cases(spyre, [case])
    report = run(load(ROOT / "examples/programs/calibration/softmax_stages_5_1core.json", spyre), spyre).report
    assert report.data["card_cycles"] > 2 * report.data["launch_cycles"]  # 8 tiles differ from one
    assert point.simulated == pytest.approx(_tiled([report]), rel=1e-9)


def test_a_figure_measured_two_ways_is_two_ranked_cases_and_their_ratio(tmp_path, monkeypatch, spyre):
    """``device_us`` naming an old and a new division: each runs the split its name maps in ``split``, or the
    one its name states in words (a dim it leaves out is not split); the two are ranked as one shape and their
    ratio (first over second) is a point of its own."""
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    cases = _cases(tmp_path, [
        {"name": "kv", "what": "matmul [64, 1024] x [1024, 512], decode", "device_us": {"old": 40.0, "new": 20.0},
         "split": {"old": {"b": 1, "m": 8, "n": 4, "k": 1}, "new": {"n": 8}}},
        {"name": "up", "what": "matmul [64,1024] x [1024,1024]", "device_us": {"m8_n4": 30.0, "n=8,k=4": 10.0}}])
    assert cases["kv.old"].program == matmul_program(1, 64, 512, 1024, (1, 8, 4, 1))
    assert cases["kv.new"].program == matmul_program(1, 64, 512, 1024, (1, 1, 8, 1))
    assert cases["up.m8_n4"].split == (1, 8, 4, 1)
    assert cases["up.n=8,k=4"].split == (1, 1, 8, 4)
    assert {c.shape for c in cases.values() if c.name.startswith(("kv", "up"))} == {"kv", "up"}
    chosen = [c for name, c in cases.items() if name.startswith("kv")]
    points, not_run = run_cases(spyre, chosen)
    times = {p.label: p.simulated for p in points if p.category == "matmul decode (single)"}
    (ratio,) = [p for p in points if p.category == "division ratio (single)"]
    assert not not_run
    assert ratio.measured == 2.0
    assert ratio.simulated == times["old: (b, m, n, k) = (1, 8, 4, 1)"] / times["new: (b, m, n, k) = (1, 1, 8, 1)"]
    assert [p.category for p in counted(points)] == ["matmul decode (single)"] * 2  # the ratio is not counted again


def test_a_pair_published_as_its_ratio_alone_is_judged_as_that_ratio(tmp_path, monkeypatch, spyre):
    """An old/new pair whose source gives only the speed-up: its two divisions from ``split``'s two names, two
    'NAME_split' entries or the tuples ``what`` states ((m, n, k) or (b, m, n, k)), first over second; each runs
    with no time of its own and the pair is one counted figure, its ratio. An entry with no two divisions, a
    ratio that is no positive number, or no matmul shape is listed as not run, naming its JSON path."""
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    shape = "matmul [64, 1024] x [1024, 512], decode"
    cases = _cases(tmp_path, [
        {"name": "kv", "what": f"{shape}: (8,4,1) time / (1,1,8,1) time", "ratio": 2.0},
        {"name": "up", "what": shape, "speedup": 1.5, "split": {"old": {"m": 8, "n": 4}, "new": {"n": 8}}},
        {"name": "qo", "what": shape, "speed_up": 1.5, "old_split": {"m": 8, "n": 4}, "new_split": {"n": 8}},
        {"name": "one", "what": f"{shape}, (8,4,1)", "ratio": 2.0},
        {"name": "neg", "what": f"{shape}: (8,4,1) / (1,8,1)", "ratio": -2.0},
        {"name": "sfu", "what": "neg of 2048×4096, (8,4,1) / (1,8,1)", "ratio": 2.0}])
    assert [cases[f"kv.{d}"].split for d in ("(8,4,1)", "(1,1,8,1)")] == [(1, 8, 4, 1), (1, 1, 8, 1)]
    assert [cases[f"{n}.{d}"].split for n in ("up", "qo") for d in ("old", "new")] == [(1, 8, 4, 1), (1, 1, 8, 1)] * 2
    assert {(c.problem.split(": ")[0], c.measured_us == c.measured_us) for n, c in cases.items()
            if n.startswith(("kv", "up"))} == {("", False)}  # runnable, no time of their own (NaN)
    assert [cases[n].problem.split(":")[0] for n in ("one", "neg", "sfu")] == [
        "cases[one].split", "cases[neg].ratio", "cases[sfu].what"]
    points, not_run = run_cases(spyre, [c for n, c in cases.items() if n.startswith(("kv", "up"))])
    assert not not_run
    (kv, up) = points
    assert (kv.category, kv.measured, up.measured) == ("division ratio", 2.0, 1.5)
    times = [run(parse(matmul_program(1, 64, 512, 1024, s), spyre, "kv"), spyre).report.data["latency_us"]
             for s in ((1, 8, 4, 1), (1, 1, 8, 1))]
    assert kv.simulated == pytest.approx(times[0] / times[1], rel=1e-12) == up.simulated
    assert counted(points) == points  # the pair's one figure is counted


def test_an_entry_whose_name_an_earlier_one_has_is_listed_not_run(tmp_path):
    """Two entries of one name: the first is a case, the second one that cannot run, naming its JSON path (it was
    dropped unseen, with the first's figure replaced by its own)."""
    kv = {"name": "kv", "what": "matmul [64, 4096] x [4096, 1024]", "device_us": 60.5, "split": {"m": 8, "n": 4}}
    cases = load_cases(calibration_folder(tmp_path, [ROW], [kv, {**kv, "device_us": 99.0}]))[0][1:]
    assert [(c.name, c.measured_us) for c in cases][:1] == [("kv", 60.5)]
    assert len(cases) == 2
    assert (cases[1].source, cases[1].problem) == (
        str(tmp_path / SINGLE), "cases[1].name: expected a name no other entry has; 'kv' is cases[0]'s too")


def test_two_settings_of_one_division_are_told_apart_in_the_tables(tmp_path, monkeypatch, spyre):
    """An entry measured under two compiler settings with one split: its two rows carry the setting's name, not
    the split alone (both read '(b, m, n, k) = (1, 4, 8, 1)', the best and the first choice alike)."""
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    cases = _cases(tmp_path, [{"name": "kv", "what": "matmul [64, 1024] x [1024, 512], decode",
                               "device_us": {"relayout_off": 40.0, "lx_relayout_on": 30.0}}])
    points, _ = run_cases(spyre, [cases["kv.relayout_off"], cases["kv.lx_relayout_on"]])
    assert [p.label for p in points][:2] == ["relayout_off: (b, m, n, k) = (1, 4, 8, 1)",
                                             "lx_relayout_on: (b, m, n, k) = (1, 4, 8, 1)"]


def test_cores_the_words_leave_out_are_the_names_for_every_sfu_kernel(tmp_path):
    """Where ``what`` states the kernel but not its cores, the sweep's name gives them, for a pointwise op or a row
    reduction as for a softmax chain (those ran on the card's 32)."""
    cases = _cases(tmp_path, [
        {"name": "neg_8192x2048_2core", "what": "neg of 8192×2048", "device_us": 771.2},
        {"name": "rowmax_2048x8192_4core", "what": "max along the row of 2048×8192", "device_us": 550.3},
        {"name": "stages_7_2", "what": "softmax 2048×512 in 8 LX tiles, chain of 7", "device_us": 428.0}])
    assert cases["neg_8192x2048_2core"].program == pointwise_program("neg", 8192, 2048, 2, "neg_8192x2048_2core")
    assert cases["rowmax_2048x8192_4core"].program == pointwise_program("max", 2048, 8192, 4,
                                                                        "rowmax_2048x8192_4core")
    assert cases["stages_7_2"].program == softmax_tile_program(2, 2, "stages_7_2", 256, 512)


def test_a_name_that_is_no_string_is_named_by_its_json_path(tmp_path):
    data = calibration_folder(tmp_path, [ROW], [{"name": "kv", "device_us": 1.0}, {"name": 5, "device_us": 1.0}])
    with pytest.raises(SpyreEmuError) as error:
        load_cases(data)
    assert (error.value.file, error.value.path, error.value.message) == (
        str(data / SINGLE), "cases[1].name", "expected a string, got 5")


def test_a_split_stated_in_words_that_cannot_be_is_named_where_it_is_stated(tmp_path):
    """A division the words state with a cut of 0: the reason names ``what``, where it is (it named ``split``, a
    field the entry does not have, and its JSON form)."""
    case = _cases(tmp_path, [{"name": "kv", "what": "matmul [64,4096] x [4096,1024] with split m=0, n=4",
                              "device_us": 5.0}])["kv"]
    assert case.problem == "cases[kv].what: expected a division of positive integers after 'split' or 'division' " \
                           "(as in 'split m=8, n=4'), got {'m': 0, 'n': 4}"
