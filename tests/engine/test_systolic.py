"""The plain systolic array: a GEMM takes SCALE-Sim v3's Total Cycles, derived here by hand.

Per dataflow (docs/decisions/plain-systolic.md), with the array R x C and the GEMM (M x K) @ (K x N):
os maps M x N and streams K, ws maps K x N and streams M, is maps K x M and streams N; a fold takes
preload + R + C + streamed - 2 cycles (preload R for ws and is) and the GEMM folds * fold - 1.
"""

import numpy as np
import pytest

from spyre_emu.config import load_machine
from spyre_emu.engine.pack import pt_pass_cycles
from spyre_emu.errors import ProgramError
from spyre_emu.gemm import run_gemm
from spyre_emu.numerics import from_f32, to_f32
from spyre_emu.pipeline import run
from spyre_emu.unit_program import parse_unit_program
from tests.conftest import ROOT, program

PLAIN = ROOT / "configs" / "plain-systolic.toml"


def plain(rows: int, cols: int, dataflow: str):
    return load_machine(PLAIN, [f"pt.pe_rows={rows}", f"pt.pe_cols={cols}", f"pt.dataflow={dataflow}"])


CASES = {
    # (M, N, K, R, C, dataflow): (folds, fold cycles, total cycles)
    # os: ceil(37/8) * ceil(23/8) = 5 * 3 folds of 51 + 8 + 8 - 2 = 65: 15 * 65 - 1
    (37, 23, 51, 8, 8, "os"): (15, 65, 974),
    # ws: ceil(51/8) * ceil(23/8) = 7 * 3 folds of 8 + 8 + 8 + 37 - 2 = 59: 21 * 59 - 1
    (37, 23, 51, 8, 8, "ws"): (21, 59, 1238),
    # is: ceil(51/8) * ceil(37/8) = 7 * 5 folds of 8 + 8 + 8 + 23 - 2 = 45: 35 * 45 - 1
    (37, 23, 51, 8, 8, "is"): (35, 45, 1574),
    # a non-square array: os ceil(100/16) * ceil(70/8) = 7 * 9 folds of 9 + 16 + 8 - 2 = 31
    (100, 70, 9, 16, 8, "os"): (63, 31, 1952),
    # one MAC: os one fold of 1 + 4 + 4 - 2 = 7; ws one fold of 4 + 4 + 4 + 1 - 2 = 11
    (1, 1, 1, 4, 4, "os"): (1, 7, 6),
    (1, 1, 1, 4, 4, "ws"): (1, 11, 10),
    # SCALE-Sim's own test GEMM (test/general, 32 x 32): ws 8 * 4 folds of 32 + 32 + 32 + 256 - 2 = 350
    (256, 128, 256, 32, 32, "ws"): (32, 350, 11199),
    # is: ceil(256/32) * ceil(256/32) = 64 folds of 32 + 32 + 32 + 128 - 2 = 222
    (256, 128, 256, 32, 32, "is"): (64, 222, 14207),
}


@pytest.mark.parametrize(("shape", "want"), CASES.items(), ids=[str(c) for c in CASES])
def test_gemm_takes_scalesim_total_cycles(shape, want):
    m, n, k, rows, cols, dataflow = shape
    report = run_gemm(m, n, k, plain(rows, cols, dataflow))
    assert (report.data["systolic"]["folds"], report.data["systolic"]["fold_cycles"], report.total_cycles) == want
    assert report.data["pt"]["passes"] == 1
    assert report.data["pt"]["macs"] == m * n * k


def test_utilization_follows_scalesim_definitions():
    """os 37 x 23 x 51 on 8 x 8: the folds map 37 * 23 of 15 * 64 PEs; compute utilization scales that by
    K over the fold's 65 cycles; overall is all MACs over 64 PEs x 974 cycles (SCALE-Sim: 88.6458 %,
    69.5529 %, 69.6243 %)."""
    report = run_gemm(37, 23, 51, plain(8, 8, "os"))
    s = report.data["systolic"]
    mapping = 37 * 23 / (15 * 64)
    assert s["mapping_efficiency_percent"] == pytest.approx(100 * mapping, abs=1e-6)
    assert s["compute_util_percent"] == pytest.approx(100 * mapping * 51 / 65, abs=1e-6)
    assert s["overall_util_percent"] == pytest.approx(100 * 37 * 23 * 51 / (64 * 974), abs=1e-6)
    assert report.data["pt"]["mac_utilization"] == pytest.approx(37 * 23 * 51 / (64 * 974), abs=1e-6)


def test_ws_and_is_count_one_line_more_per_column_for_compute_utilization():
    """ws 37 x 23 x 51 on 8 x 8: SCALE-Sim divides by 2R + 2C + M - 3 = 66 cycles, not the fold's 59."""
    s = run_gemm(37, 23, 51, plain(8, 8, "ws")).data["systolic"]
    assert s["compute_util_percent"] == pytest.approx(100 * 51 * 23 / (21 * 64) * 37 / 66, abs=1e-6)


def test_spyre_pass_timing_ignores_columns(spyre):
    """Spyre pads a pass to rows_per_pass x cols_per_pass: 8 + 64 + 8 cycles for k = 64 whatever its shape."""
    assert pt_pass_cycles(spyre, 8, 64, "fp16") == pt_pass_cycles(spyre, 1, 64, "fp16", cols=10) == 80


def _pass(**fields) -> dict:
    return program({0: {"pt0": [{"op": "matmul", "a": 0, "b": 65536, "c": 131072, "rows": 8, "k": 64, **fields}]}})


def test_a_spyre_pass_has_at_most_cols_per_pass_columns(spyre):
    with pytest.raises(ProgramError, match=r"pt0\[0\]\.cols: a PT pass has at most 64 columns"):
        parse_unit_program(_pass(cols=65), spyre)


def test_a_plain_pass_may_have_any_shape():
    units = parse_unit_program(_pass(rows=100, cols=200), plain(8, 8, "os"))
    assert units.instructions()[0].args["cols"] == 200


def test_plain_pass_computes_its_columns(tmp_path):
    """C (5 x 100) = A (5 x 70) @ B (70 x 100): A rows of 2 sticks, B packed, C rows of 2 sticks (100 values
    then 28 zero lanes)."""
    rng = np.random.default_rng(6)
    a, b = rng.standard_normal((5, 70)).astype(np.float16), rng.standard_normal((70, 100)).astype(np.float16)
    a_dev = np.pad(a, ((0, 0), (0, 58)))  # 70 -> 128 values: whole sticks per row
    b_dev = np.pad(b.reshape(-1), (0, 14080 // 2 - 7000))
    loads = [{"op": "load", "dram": "a", "lx": 0, "bytes": a_dev.nbytes},
             {"op": "load", "dram": "b", "lx": 4096, "bytes": b_dev.nbytes, "signal": ["in"]}]
    mm = {"op": "matmul", "a": 0, "b": 4096, "c": 32768, "rows": 5, "k": 70, "cols": 100, "wait": ["in"],
          "signal": ["done"]}
    store = [{"op": "store", "lx": 32768, "dram": "c", "bytes": 5 * 256, "wait": ["done"]}]
    bufs = {"a": {"bytes": a_dev.nbytes, "shape": [5, 128]}, "b": {"bytes": b_dev.nbytes, "shape": [7040]},
            "c": {"bytes": 5 * 256, "shape": [5, 128], "output": "c.npy"}}
    machine = plain(8, 8, "os")
    units = parse_unit_program(program({0: {"load": loads, "pt0": [mm], "store": store}}, bufs), machine)
    np.save(tmp_path / "a.npy", a_dev)
    np.save(tmp_path / "b.npy", b_dev)
    got = run(units, machine, functional=True, inputs={"a": tmp_path / "a.npy", "b": tmp_path / "b.npy"}).outputs["c"]
    want = to_f32(from_f32(a.astype(np.float32) @ b.astype(np.float32), "fp16"), "fp16").reshape(5, 100)
    np.testing.assert_allclose(got[:, :100].astype(np.float32), want, rtol=2e-2, atol=5e-2)
    assert not got[:, 100:].any()
