"""Single figures (measurements.json entries) the calibration data does not hold, as validate would read them
from another folder: a matmul is known by the shape its ``what`` states whatever its name, a ring move by
the bytes it states, and an entry validate has no program for is listed as not run, never dropped unseen."""

from spyre_emu.calibration import (
    QUOTED,
    SINGLE,
    SWEEP,
    load_cases,
    matmul_program,
    ring_scatter_program,
    ring_shift_program,
    unpublished_split,
)
from spyre_emu.cli import main
from tests.conftest import calibration_folder

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


def test_anunpublished_split_is_the_tuned_one_or_the_least_loading():
    """(4, 8) where the shape takes it evenly; else, for [4, 64, 128] x [4, 128, 128] (N and K 2 sticks), the
    even divisions of 32 and a core's elements read and written, (B/b)(M/m K + K N/n + M/m N/n):
    (1,16,2) 35,840; (1,32,1) 67,584; (2,8,2) 19,456; (2,16,1) 34,816; (4,4,2) 11,264; (4,8,1) 18,432."""
    assert unpublished_split(1, 512, 4096, 4096) == (1, 4, 8, 1)
    assert unpublished_split(1, 1, 4096, 4096) == (1, 1, 32, 1)  # one row: only N can take 32
    assert unpublished_split(4, 64, 128, 128) == (4, 4, 2, 1)
    assert unpublished_split(2, 8, 64, 64) == (1, 4, 8, 1)  # no even division fits: validate reports its problem


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
                      "`what` states no matmul shape ([M,K] x [K,N]) and it is no ring shift or scatter; whole "
                      "calls are run by name (launch_phases_mean, sdpa_encoder_b1, block_granite_prefill, "
                      "swiglu_granite_prefill)"]


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
