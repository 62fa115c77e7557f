"""The report (text and JSON) and the Chrome trace that `spyre-emu run` writes."""

import json

import numpy as np

from spyre_emu.cli import main
from tests.conftest import ROOT

SOFTMAX = ROOT / "examples" / "programs" / "softmax_1core.json"


def test_report_and_trace(tmp_path, capsys):
    report, trace = tmp_path / "r.json", tmp_path / "t.json"
    assert main(["run", str(SOFTMAX), "--json", str(report), "--trace", str(trace)]) == 0
    text = capsys.readouterr().out
    data = json.loads(report.read_text())
    assert isinstance(data["total_cycles"], int)
    assert data["total_cycles"] == data["launch_cycles"] + data["card_cycles"]
    assert data["launch_cycles"] == 8030  # configs/spyre.toml
    assert data["latency_us"] == round(data["total_cycles"] / data["clock_ghz"] / 1000, 6)
    assert f"{data['total_cycles']} cycles" in text
    assert data["units"]["sfu"]["units_used"] == 2
    assert data["units"]["sfu"]["busy_cycles"] > 0
    assert {"read_bytes", "write_bytes", "gb_per_s", "channels"} <= set(data["dram"])
    assert data["dram"]["read_bytes"] == data["dram"]["write_bytes"] == 64 * 1024 * 2
    events = json.loads(trace.read_text())["traceEvents"]
    spans = [e for e in events if e["ph"] == "X" and e["cat"] == "unit"]
    tracks = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "thread_name"}
    assert {name for pid, name in tracks if pid >= 100} == {"load", "store", "sfu0", "sfu1"}  # core0's units
    assert all(e["ph"] != "M" or "ts" in e for e in events)
    assert max(e["args"]["end_cycle"] for e in spans) == data["card_cycles"]
    ideal = tmp_path / "t_ideal_cycles" / "inductor-spyre" / "softmax_1core" / "perf" / "ideal_cycles.json"
    assert json.loads(ideal.read_text()) == [{"ideal_cycles": 0, "op_category": "program"}]  # no PT work


def test_functional_run_writes_outputs(tmp_path, capsys):
    out = tmp_path / "new" / "dir"  # created as needed
    assert main(["run", str(SOFTMAX), "--functional", "--quiet", "--output-dir", str(out)]) == 0
    y = np.load(out / "softmax_y.npy")
    assert y.shape == (64, 1024)
    np.testing.assert_allclose(y.astype(np.float32).sum(axis=1), 1.0, rtol=1e-2)
