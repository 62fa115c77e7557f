"""validate's whole calls (spyre_emu/validation/host.py): the host model's figures by hand, the block's classes by
hand, the section in docs/validation.md, and bad input as one line."""

import json

from spyre_emu.cli import main
from spyre_emu.config import load_machine
from spyre_emu.host import load_host
from spyre_emu.results import Report
from spyre_emu.validation.host import (
    STORED,
    HostRow,
    Launched,
    block_rows,
    by_class,
    call_wall_rows,
    launch_phase_rows,
    mlp_rows,
)
from tests.conftest import require_shared

MACHINE, HOST = load_machine(), load_host()
PHASES = {"deserialization": 751.5, "preparation": 4205.0, "compute": 429.5, "total": 5519.0}


def test_launch_phases_by_hand():
    """A cold launch the host waits for: deserialize 751.5 and prepare 4,205 µs (configs/host.toml, taken from this
    measurement: not counted), then the kernel's 20 µs on the card (its dispatch inside) and the 5 µs completion
    notice: compute 25 µs, total 751.5 + 4,205 + 25 = 4,981.5 µs."""
    rows = launch_phase_rows(PHASES, 20.0, HOST, MACHINE)
    assert [(r.figure, r.simulated, r.counted) for r in rows] == [
        ("deserialization", 751.5, False), ("preparation", 4205.0, False), ("compute", 25.0, True),
        ("total", 4981.5, False)]
    assert round(rows[2].error, 12) == round(25.0 / 429.5 - 1, 12)
    assert "dispatch 7.3 µs, the kernel 12.7 µs, completion 5.0 µs" in rows[2].note  # 8,030 cycles at 1.1 GHz
    assert "graph_us, 151.8 µs" in rows[2].why


def test_warm_call_by_hand():
    """Three launches of 100, 50, 50 µs, graphs cached: patch 0-20, kernel 20-120; patch 20-40, kernel 120-170;
    patch 40-60, kernel 170-220; the host hears of the end 5 µs later: 225 µs, against the mean and the min."""
    mean, least = call_wall_rows({"wall_us_mean": 200.0, "wall_us_min": 180.0}, [100.0, 50.0, 50.0], HOST, MACHINE)
    assert (mean.simulated, mean.counted, least.simulated, least.counted) == (225.0, True, 225.0, False)
    assert round(mean.error, 12) == 0.125
    assert mean.note == "3 launches: 200.0 µs on the card, each patched in 20 µs"


def _launched() -> Launched:
    """A weight matmul (100 µs); a fused scale and softmax (80 µs: kernel cycles 100 and 300); a batched matmul over
    heads (40 µs); a relayout (30 µs); a norm (10 µs)."""
    def program(*kernels):
        return {"kernels": [{"name": f"k{i}", "op": op, "dims": dims} for i, (op, dims) in enumerate(kernels)]}
    kernels = [program(("batchmatmul", {"mb": 8, "in": 64, "out": 64})),
               program(("mul", {"d0": 2, "mb": 8, "out": 8}), ("softmax", {"d0": 2, "mb": 8, "out": 8})),
               program(("batchmatmul", {"x": 2, "mb": 8, "in": 8, "out": 64})),
               program(("ReStickifyOpHBM", {"mb": 8, "out": 64})), program(("rmsnorm", {"mb": 8, "out": 64}))]
    cycles = [[50], [100, 300], [7], [3], [1]]
    us = [100.0, 80.0, 40.0, 30.0, 10.0]
    reports = [Report({"latency_us": t, "kernels": [{"name": f"k{i}", "cycles": c} for i, c in enumerate(cs)]})
               for t, cs in zip(us, cycles, strict=True)]
    return Launched(kernels, reports)


def test_block_by_class_by_hand():
    """The fused program's 80 µs go 20 to the scale (pointwise) and 60 to softmax (attention); the block is 260 µs
    against 400 (relayout off, counted) and 330 (LX relayout on); outside the matmul: 0.3 and 0.2 ms on silicon,
    0.2 ms in the model; LX relayout saves 70 µs."""
    launched = _launched()
    assert by_class(launched) == {"matmul": (1, 100.0), "attention": (2, 100.0), "norm": (1, 10.0),
                                  "relayout": (1, 30.0), "pointwise": (1, 20.0)}
    off, on = block_rows({"relayout_off": 400.0, "lx_relayout_on": 330.0}, launched)
    assert (off.simulated, off.counted, on.simulated, on.counted) == (260.0, True, 260.0, False)
    assert round(off.error, 12) == -0.35
    assert off.note == (f"5 kernel programs, {STORED}; µs by class: matmul 100, attention 100, norm 10, "
                        "relayout 30, pointwise 20")
    assert "about 0.3 ms (0.2 ms with LX relayout) outside the matmuls against the model's 0.2 ms" in off.why
    assert "LX relayout's 70 µs come from intermediates kept in LX" in off.why


def _mlp(matmul_us: float, pointwise_us: float) -> Launched:
    """A matmul of 64 × 512 × 77,000 (2,523,136,000 MACs) in one program, a silu and a mul (cycles 1 and 3) in
    another."""
    kernels = [{"kernels": [{"name": "k0", "op": "batchmatmul", "dims": {"mb": 64, "in": 512, "out": 77000}}]},
               {"kernels": [{"name": "k0", "op": "silu", "dims": {"mb": 64, "out": 512}},
                            {"name": "k1", "op": "mul", "dims": {"mb": 64, "out": 512}}]}]
    fused = [{"name": "k0", "cycles": 1}, {"name": "k1", "cycles": 3}]
    reports = [Report({"latency_us": matmul_us, "kernels": [{"name": "k0", "cycles": 5}]}),
               Report({"latency_us": pointwise_us, "kernels": fused})]
    return Launched(kernels, reports)


def test_mlp_pt_utilization_by_hand():
    """The card's peak is 32 cores × 2 arrays × 512 MAC × 1.1 GHz = 36,044,800 MAC/µs = 32,768 × 1,100; 32,768 × 77,000
    MACs in 80 + 20 µs are 77,000 / 110,000 = 70 %, inside 66-79 %: error 0. In 80 + 45 µs, 56 %: 56 / 66 - 1 below
    the range; in 70 + 10 µs, 87.5 %: 87.5 / 79 - 1 above it."""
    util = {"low": 66.0, "high": 79.0}
    (inside,) = mlp_rows(util, _mlp(80.0, 20.0), MACHINE)
    assert (inside.measured, inside.high, inside.unit, inside.counted) == (66.0, 79.0, "%", True)
    assert round(inside.simulated, 12) == 70.0
    assert inside.error == 0.0
    assert inside.shown == "66.0–79.0 %"
    assert inside.note.startswith("2.52 GMAC in 100.0 µs (2 kernel programs, µs by class: matmul 80, pointwise 20) "
                                  "at the card's peak 36.04 TMAC/s (32 cores × 1024 MAC/cycle × 1.1 GHz)")
    (below,) = mlp_rows(util, _mlp(80.0, 45.0), MACHINE)
    assert round(below.simulated, 12) == 56.0
    assert round(below.error, 12) == round(56 / 66 - 1, 12)
    assert "outside the matmuls the MLP spends 45 µs (36 %)" in below.why
    (above,) = mlp_rows(util, _mlp(70.0, 10.0), MACHINE)
    assert round(above.simulated, 12) == 87.5
    assert round(above.error, 12) == round(87.5 / 79 - 1, 12)


def test_a_point_figure_keeps_its_error():
    """Without a range the error is relative to the one measured figure, above or below it."""
    assert HostRow("c", "f", 200.0, 250.0, True).error == 0.25
    assert HostRow("c", "f", 200.0, 150.0, True).error == -0.25
    assert HostRow("c", "f", 200.0, 250.0, True).shown == "200.0 µs"


def test_validate_runs_the_swiglu_range(tmp_path):
    """The quoted range needs no measurements.json entry: validate runs the front end's SwiGLU launches
    (examples/programs/calibration/swiglu_granite_prefill.launches.json) against it."""
    out = tmp_path / "validation.md"
    data = _data(tmp_path, {"name": "launch_phases_mean", "phases_us": PHASES})
    assert main(["validate", "--only", "swiglu_granite_prefill", "--data", str(data), "--out", str(out),
                 "--quiet"]) == 0
    text = out.read_text()
    assert "| `swiglu_granite_prefill` | PT utilization, whole MLP | 66.0–79.0 % |" in text
    assert "80.53 GMAC in " in text   # 3 × 512 × 4096 × 12800
    assert "over 1 counted figures" in text


def test_validate_runs_the_launch_phases(tmp_path):
    require_shared()
    out = tmp_path / "validation.md"
    assert main(["validate", "--only", "launch_phases_mean", "--out", str(out), "--quiet"]) == 0
    text = out.read_text()
    assert "## With the host, and a whole block" in text
    assert "| `launch_phases_mean` | deserialization | 751.5 µs | 751.5 µs | +0.0 % | no |" in text
    assert "| `launch_phases_mean` | compute | 429.5 µs |" in text
    assert "over 1 counted figures" in text
    assert "Not run" not in text


def _data(tmp_path, entry):
    """A data folder with one sweep row (not selected) and one whole call."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "matmul_split_sweep.csv").write_text("role,phase,B,M,N,K,split_b,split_m,split_n,split_k,device_us\n"
                                                 "qo_proj,decode,1,64,4096,4096,1,4,8,1,221.0\n")
    (data / "measurements.json").write_text(json.dumps({"cases": [entry]}))
    return data


def test_bad_whole_calls_are_one_line(tmp_path, capsys):
    good = {"name": "launch_phases_mean", "phases_us": PHASES}
    bad = {"name": "launch_phases_mean", "phases_us": {**PHASES, "compute": "slow"}}
    programs = tmp_path / "programs"
    programs.mkdir()
    out = tmp_path / "validation.md"
    args = ["validate", "--only", "launch_phases_mean", "--out", str(out), "--quiet"]
    assert main([*args, "--data", str(_data(tmp_path, good)), "--programs", str(programs)]) == 2
    (programs / "launch_phases_mean.launches.json").write_text(json.dumps({"format": "x", "launches": []}))
    assert main([*args, "--data", str(tmp_path / "data"), "--programs", str(programs)]) == 2
    (programs / "launch_phases_mean.launches.json").write_text(json.dumps(
        {"format": "spyre-emu.launches", "launches": [{"format": "spyre-emu.kernel-program", "version": 1}]}))
    assert main([*args, "--data", str(tmp_path / "data"), "--programs", str(programs)]) == 2
    (tmp_path / "data" / "measurements.json").write_text(json.dumps({"cases": [bad]}))
    assert main([*args, "--data", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.splitlines()
    path = programs / "launch_phases_mean.launches.json"
    assert err[0] == f"spyre-emu: error: {path}: launch list missing (python examples/make_frontend_calibration.py " \
                     "writes it)"
    assert err[1] == f"spyre-emu: error: {path}: format: expected format 'spyre-emu.launches'"
    assert err[2] == f"spyre-emu: error: {path}: launches[0]: 'tensors' is a required property"
    assert err[3] == f"spyre-emu: error: {tmp_path / 'data' / 'measurements.json'}: " \
                     "cases[launch_phases_mean].phases_us.compute: expected a positive number, got 'slow'"
    assert len(err) == 4
    assert not out.exists()
