"""validate's scratchpad planner (validation/lx_plan.py): a workload whose LX tensors do not all fit keeps in LX,
in first-written order, what still lowers there; the rest is in DRAM, and the numbers do not change."""

import json

import numpy as np
import pytest

from spyre_emu.config import load_machine
from spyre_emu.errors import LxOverflowError
from spyre_emu.pipeline import parse, run
from spyre_emu.validation.calibration import load_cases
from spyre_emu.validation.cases import run_cases
from spyre_emu.validation.lx_plan import planned
from spyre_emu.validation.workloads import softmax_tile_program

ROWS, COLS = 512, 512  # one core: each [512, 512] intermediate is 4,096 sticks (512 KB), each [512, 1] 512
SMALL = 1 << 20  # LX of 1 MB a core: (1 MB - 64 KB) x 0.8 = 6,144 sticks usable


def _tile(rows: int = ROWS) -> dict:
    return softmax_tile_program(0, 1, "tile", rows, COLS)


def _spaces(program) -> dict[str, str]:
    return {name: t.space for name, t in program.tensors.items() if name in "cdms"}


def _lx(size_bytes: int = SMALL):
    """The card with ``size_bytes`` of LX a core."""
    return load_machine(None, [f"lx.size_bytes={size_bytes}"])


def test_a_workload_that_fits_runs_as_given(spyre):
    data = _tile()
    program = planned(data, spyre, "tile")
    assert _spaces(program) == {"c": "lx", "d": "lx", "m": "lx", "s": "lx"}
    assert program.units == parse(data, spyre, "tile").units


def test_what_does_not_fit_goes_to_dram_in_first_written_order():
    """c (4,096 sticks), m and s (512 each) and the 64 kept for buffers fit the 6,144 usable, d does not; c is
    written first (the clone), so d is the one moved to DRAM."""
    machine = _lx()
    with pytest.raises(LxOverflowError):
        parse(_tile(), machine, "tile")
    assert _spaces(planned(_tile(), machine, "tile")) == {"c": "lx", "d": "dram", "m": "lx", "s": "lx"}


def test_neither_intermediate_fits():
    """At 1,024 rows an intermediate is 8,192 sticks, more than the 6,144 usable; the row statistics fit."""
    assert _spaces(planned(_tile(1024), _lx(), "tile")) == {"c": "dram", "d": "dram", "m": "lx", "s": "lx"}


def test_a_tensor_written_over_a_moved_one_takes_its_own_place():
    """exp writes e over d (its one reader, one step: exact in place). d does not fit beside c and goes to DRAM,
    so e takes a place of its own in LX (c's, free once sub has read it); the softmax's values unchanged."""
    data = _tile()
    data["tensors"]["e"] = {**data["tensors"]["d"], "in_place_of": "d"}
    for kernel in data["kernels"]:
        kernel["inputs"] = ["e" if (name == "c" and kernel["op"] in ("sum", "realdiv")) else name
                            for name in kernel["inputs"]]
        kernel["outputs"] = ["e" if kernel["op"] == "exp" else name for name in kernel["outputs"]]
    machine = _lx()
    program = planned(data, machine, "tile")
    assert {name: t.space for name, t in program.tensors.items() if name in "cdems"} == {
        "c": "lx", "d": "dram", "e": "lx", "m": "lx", "s": "lx"}
    x = np.random.default_rng(7).standard_normal((ROWS, COLS)).astype(np.float16)
    want = run(parse(_tile(), load_machine(), "tile"), load_machine(), functional=True, inputs={"x": x}).outputs["y"]
    got = run(program, machine, functional=True, inputs={"x": x}).outputs["y"]
    np.testing.assert_array_equal(got, want)


def test_a_moved_intermediate_computes_the_same_softmax():
    machine = _lx()
    x = np.random.default_rng(7).standard_normal((ROWS, COLS)).astype(np.float16)
    got = run(planned(_tile(), machine, "tile"), machine, functional=True, inputs={"x": x}).outputs["y"]
    want = run(parse(_tile(), load_machine(), "tile"), load_machine(), functional=True, inputs={"x": x}).outputs["y"]
    np.testing.assert_array_equal(got, want)
    f = x.astype(np.float32)
    e = np.exp(f - f.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got.astype(np.float32), e / e.sum(axis=1, keepdims=True), atol=2e-3)


def test_moving_to_dram_costs_time():
    """The same tile with d in DRAM takes longer than with it in LX (its sub writes and exp reads DRAM)."""
    small, full = _lx(), load_machine()
    moved = run(planned(_tile(), small, "tile"), small).report.data["card_cycles"]
    kept = run(parse(_tile(), full, "tile"), full).report.data["card_cycles"]
    assert moved > kept


def test_an_overflow_no_move_cures_is_raised():
    """With 64 KB of LX (all of it kept for the runtime) no buffer fits, whatever is in DRAM."""
    with pytest.raises(LxOverflowError, match="LX overflow"):
        planned(_tile(), _lx(1 << 16), "tile")


def test_validate_runs_a_tile_larger_than_lx(tmp_path, monkeypatch, spyre):
    """The report's one-core 4096 × 2048 softmax in 16 tiles (two 1 MB intermediates a tile, 1.55 MB usable) is a
    point of the calibration section, not a case not run; its time is the tile with d in DRAM, 16 times."""
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    what = "softmax 4096×2048 in 16 LX tiles, chain of 5, 1 core"
    (tmp_path / "measurements.json").write_text(json.dumps({"cases": [{"name": "big", "what": what,
                                                                        "device_us": 4576.0}]}))
    (case,) = load_cases(tmp_path)[0]
    (point,), not_run = run_cases(spyre, [case])
    assert not not_run
    report = run(planned(case.program, spyre, "big"), spyre).report.data
    assert _spaces(planned(case.program, spyre, "big"))["d"] == "dram"
    assert point.simulated == pytest.approx(report["latency_us"] + 15 * report["card_cycles"] / 1100, rel=1e-9)
