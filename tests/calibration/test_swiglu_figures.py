"""A SwiGLU MLP figure that validate has not seen: read from the shape or the words its ``what`` states, built as one
kernel program (gate, up, silu, mul, down) that computes the MLP, and a figure of PT utilization alone judged as
that and nothing else."""

import json

import numpy as np
import pytest

from spyre_emu.cli import main
from spyre_emu.config import load_machine
from spyre_emu.pipeline import load, parse, run
from spyre_emu.validation.calibration import load_cases
from spyre_emu.validation.cases import run_cases
from spyre_emu.validation.stated import swiglu
from spyre_emu.validation.workloads import matmul_program, swiglu_program
from tests.conftest import calibration_folder

ROW = ("kv", "decode", 1, 8, 1024, 4096, (1, 1, 16, 2))  # a sweep is never empty


def _cases(tmp_path, singles):
    return {c.name: c for c in load_cases(calibration_folder(tmp_path, [ROW], singles))[0]}


def _matmuls(program):
    return {k["name"]: (k["dims"], k["work_division"]) for k in program["kernels"] if k["op"] == "batchmatmul"}


def test_a_swiglu_is_read_from_its_shape():
    stated = swiglu("mlp_prefill", "SwiGLU MLP [1,512,4096] x [4096,12800], tuned")
    assert (stated.category, stated.problem) == ("SwiGLU MLP (single)", "")
    assert [k["op"] for k in stated.program["kernels"]] == ["batchmatmul", "batchmatmul", "silu", "mul", "batchmatmul"]
    mm = _matmuls(stated.program)
    assert mm["gate"] == mm["up"] == ({"mb": 512, "out": 12800, "in": 4096}, {"mb": 4, "out": 8, "in": 1})
    assert mm["down"] == ({"mb": 512, "out": 4096, "in": 12800}, {"mb": 4, "out": 8, "in": 1})  # 64 sticks of N
    assert stated.program["tensors"]["wd"]["shape"] == [12800, 4096]
    pointwise = {k["name"]: k["work_division"] for k in stated.program["kernels"] if k["op"] != "batchmatmul"}
    assert pointwise == {"silu": {"mb": 32, "out": 1}, "mul": {"mb": 32, "out": 1}}
    one = swiglu("m", "SwiGLU MLP [1,4096] x [4096,12800]").program["kernels"][2]["work_division"]
    assert one == {"mb": 1, "out": 8}  # one row: the intermediate's 200 sticks over 8 of the 32 cores (200 = 8 · 25)
    shared = swiglu("m", "SwiGLU MLP [1,512,4096] x [1,4096,12800]")  # a weight of one batch is shared too
    assert shared.program == stated.program | {"note": "m"}
    batched = swiglu("m", "SwiGLU MLP [4,1,4096] x [4,4096,12800]").program  # the perf suite's MLP: per-batch weights
    assert batched["tensors"]["wd"]["shape"] == [4, 12800, 4096]
    assert _matmuls(batched)["gate"][0] == {"x": 4, "mb": 1, "out": 12800, "in": 4096}
    assert batched["kernels"][3]["work_division"] == {"x": 4, "mb": 1, "out": 8}  # 4 batches × 8 of 200 sticks


def test_a_swiglu_is_read_from_its_words():
    granite = swiglu("mlp_decode", "Granite-3.3-8B MLP (gate, up, silu, mul, down), decode")
    assert _matmuls(granite.program)["gate"][0] == {"mb": 64, "out": 12800, "in": 4096}  # the sweep's decode rows
    sized = swiglu("m", "a SwiGLU with hidden 2048, intermediate 8192, 128 tokens, 16 cores")
    # down over 16 cores: a core of (m, n) = (1, 16) reads 128·8192 + 8192·128 + 128·128 elements, (4, 4) reads
    # 32·8192 + 8192·512 + 32·512 and (16, 1) 8·8192 + 8192·2048 + 8·2048: the least-loading is (1, 16)
    assert _matmuls(sized.program)["down"] == ({"mb": 128, "out": 2048, "in": 8192}, {"mb": 1, "out": 16, "in": 1})
    rows = swiglu("m", "SwiGLU MLP [4,1,4096] x [4096,12800]")  # a 3-D input over a shared weight: 4 tokens
    assert _matmuls(rows.program)["up"][0] == {"mb": 4, "out": 12800, "in": 4096}
    for what, tokens in [("SwiGLU MLP decode, Granite-3.3-8B, 1 token", 1), ("swiglu, granite, decode, batch 4", 4),
                         ("SwiGLU, Granite, prefill, batch 2, 128 tokens", 256),
                         ("SwiGLU, hidden_size=256, intermediate size 2048, 8 tokens", 8)]:
        assert _matmuls(swiglu("m", what).program)["gate"][0]["mb"] == tokens, what
    named = swiglu("swiglu_granite_decode", "the MLP of a Granite decode step")  # the name says SwiGLU
    assert _matmuls(named.program)["gate"][0] == {"mb": 64, "out": 12800, "in": 4096}


def test_what_is_not_a_swiglu_it_can_run(tmp_path):
    assert swiglu("m", "MLP gate projection [1,512,4096] x [4096,12800]") is None
    assert swiglu("mlp_up_prefill", "matmul [1,512,4096] x [4096,12800]") is None
    for one in ("SwiGLU gate matmul [1,512,4096] x [4096,12800]", "MLP (gate projection) [1,512,4096] x [4096,12800]",
                "gated MLP's down projection [1,512,12800] x [12800,4096]", "the SwiGLU's up_proj kernel"):
        assert swiglu("m", one) is None, one  # one of the MLP's matmuls: a matmul case
    assert swiglu("m", "SwiGLU MLP [4,64,128] x [2,128,256]").problem.startswith("expected [tokens, hidden] x")
    assert swiglu("m", "SwiGLU of some model").problem.startswith("expected a SwiGLU's sizes")
    assert swiglu("m", "SwiGLU in the decoder block, Granite").problem.startswith("expected a SwiGLU's sizes")
    assert swiglu("m", "SwiGLU MLP [0,4096] x [4096,12800]").problem == "a SwiGLU's sizes must be positive"
    assert swiglu("m", "SwiGLU MLP [64,128] x [128,256], 0 cores").problem == (
        "a kernel runs on 1 to 32 cores; `what` states 0")
    narrow = swiglu("m", "SwiGLU MLP [1,4096] x [4096,512]")  # one row, 8 sticks: only a K split fills 32 cores
    assert (narrow.problem, _matmuls(narrow.program)["gate"][1]) == ("", {"mb": 1, "out": 2, "in": 16})
    cases = _cases(tmp_path, [
        {"name": "gate_proj", "what": "SwiGLU gate projection [1,512,4096] x [4096,12800]", "device_us": 1000.0},
        {"name": "vague", "what": "SwiGLU of some model", "device_us": 5.0}])
    assert cases["gate_proj"].program == matmul_program(1, 512, 12800, 4096, (1, 4, 8, 1))
    assert cases["vague"].problem.startswith("expected a SwiGLU's sizes")


@pytest.mark.parametrize(("batch", "tokens", "hidden", "inter", "cores"), [
    (1, 64, 128, 320, 4),   # silu and mul over rows only
    (1, 2, 256, 200, 8),    # over 2 rows × 4 column sticks, the last one partial
    (2, 8, 128, 256, 8),    # a batched MLP, each batch its own weights: over 2 batches × 4 rows
])
def test_the_program_computes_the_mlp(tmp_path, spyre, batch, tokens, hidden, inter, cores):
    program = swiglu_program(batch, tokens, hidden, inter, "functional check", cores)
    rng = np.random.default_rng(3)
    values = {name: (rng.standard_normal(program["tensors"][name]["shape"]) / 4).astype(np.float16)
              for name in ("x", "wg", "wu", "wd")}
    for name, value in values.items():
        np.save(tmp_path / f"{name}.npy", value)
        program["tensors"][name]["data"] = f"{name}.npy"
    (tmp_path / "mlp.json").write_text(json.dumps(program))
    got = run(load(tmp_path / "mlp.json", spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    x, wg, wu, wd = (values[n].astype(np.float32) for n in ("x", "wg", "wu", "wd"))
    gate = x @ wg
    want = (gate / (1 + np.exp(-gate)) * (x @ wu)) @ wd
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


def test_a_figure_of_pt_utilization_alone_is_judged_as_that(tmp_path):
    named = _cases(tmp_path, [
        {"name": "mlp_util", "what": "SwiGLU MLP [64,128] x [128,256]", "pt_util_pct": {"low": 0.5, "high": 99}},
        {"name": "kv_util", "what": "matmul [64,128] x [128,256]", "pt_util_pct": 99.0},
        {"name": "kv_range", "what": "matmul [64,128] x [128,256]", "pt_util_pct": [99.0, 99.5]}])
    cases = [named["mlp_util"], named["kv_util"], named["kv_range"]]
    points, not_run = run_cases(load_machine(), cases)
    assert not not_run
    assert sorted((p.category, p.label) for p in points) == [("PT utilization", "kv_range"),
                                                             ("PT utilization", "kv_util"),
                                                             ("PT utilization", "mlp_util")]
    by = {p.label: p for p in points}
    assert by["mlp_util"].error == 0.0  # inside its range
    assert by["kv_range"].error == by["kv_util"].error == by["kv_util"].simulated / 99.0 - 1  # below: the low end
    assert by["kv_range"].shown == "99.00–99.50"
    machine = load_machine()
    report = run(parse(cases[0].program, machine, "t"), machine, cache=False).report.data
    assert report["pt"]["macs"] == 3 * 64 * 128 * 256  # the three matmuls' MACs, nothing else on the PT
    assert next(p for p in points if p.label == "mlp_util").simulated == 100 * report["pt"]["mac_utilization"]


def test_a_core_count_no_card_has_is_a_case_not_run(tmp_path):
    """Cores a figure states outside the card's 1 to 32 (a typo, a figure of a multi-card run) are the case's
    reason, for every kind of kernel; before, an unpublished matmul division searched all 10⁹ of them."""
    cases = _cases(tmp_path, [
        {"name": "mm", "what": "decode matmul [1,64,4096] x [4096,1024], 1000000000 cores", "device_us": 1.0},
        {"name": "neg", "what": "neg of 8192×2048, 0 cores", "device_us": 1.0},
        {"name": "chain", "what": "softmax 2048×512 in 8 LX tiles, chain of 5, 64 cores", "device_us": 1.0},
        {"name": "mlp", "what": "SwiGLU MLP [64,128] x [128,256], 33 cores", "device_us": 1.0}])
    assert {name: c.problem.rsplit(": ", 1)[-1] for name, c in cases.items() if name != "kv_decode_1x1x16x2"} == {
        "mm": "a kernel runs on 1 to 32 cores; `what` states 1000000000",
        "neg": "a kernel runs on 1 to 32 cores; `what` states 0",
        "chain": "a kernel runs on 1 to 32 cores; `what` states 64",
        "mlp": "a kernel runs on 1 to 32 cores; `what` states 33"}


def test_a_pt_utilization_alone_needs_work_on_the_pt(tmp_path):
    """A ring move or an SFU kernel with a PT utilization and no time is not run (its PT does nothing), and a
    figure measured two ways whose one side has only a PT utilization gives no ratio: the timed side runs alone."""
    cases = _cases(tmp_path, [
        {"name": "ring_x", "what": "LX to LX shift over the ring, every core c sends 131072 B to core c+1",
         "pt_util_pct": 5.0},
        {"name": "neg_x", "what": "neg of 256×256, 1 core", "pt_util_pct": 5.0},
        {"name": "pair", "what": "matmul [64,128] x [128,256]", "device_us": {"old": 5.0, "new": None},
         "pt_util_pct": {"new": 40.0}, "split": {"old": {"m": 4}, "new": {"m": 8}}}])
    why = "a PT utilization alone is judged for a matmul or a SwiGLU (work on the PT)"
    assert all(why in cases[name].problem for name in ("ring_x", "neg_x"))
    assert (cases["pair.old"].pt_util_pct, cases["pair.new"].measured_us != cases["pair.new"].measured_us) == (
        None, True)  # NaN: the new side's one figure is its PT utilization
    points, not_run = run_cases(load_machine(), [cases["pair.old"], cases["pair.new"]])
    assert not not_run
    assert sorted((p.category, p.label) for p in points) == [
        ("PT utilization", "pair.new"), ("matmul prefill (single)", "old: (b, m, n, k) = (1, 4, 1, 1)")]


def test_a_page_of_pt_utilizations_alone_is_written_without_a_plot(tmp_path, monkeypatch):
    """Figures of PT utilization alone are no times to plot: validate writes its page and no plot (it was a
    ValueError traceback, min() of no timed point)."""
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "1")
    data = calibration_folder(tmp_path, [ROW], [{"name": "kv_util", "what": "matmul [64,128] x [128,256]",
                                                 "pt_util_pct": 40.0}])
    assert main(["validate", "--data", str(data), "--only", "kv_util", "--out", str(tmp_path / "v.md"),
                 "--quiet"]) == 0
    assert "| PT utilization: kv_util | 40.00 |" in (tmp_path / "v.md").read_text()
    assert not (tmp_path / "v.png").exists()
