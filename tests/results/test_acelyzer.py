"""IBM's trace analyzer (aiu-trace-analyzer, command acelyzer) on the reference timelines in traces/:
its verification passes on every example, and its PT utilization is the report's within 1 %.

Each run takes one to four seconds; -c runs on the two examples with PT work and one without.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import ROOT, acelyzer
from tests.results.runs import STEMS

TRACES = ROOT / "traces"


def _trace(stem: str, folder: Path) -> Path:
    path = folder / f"{stem}.json"
    path.write_bytes(gzip.decompress((TRACES / f"{stem}.json.gz").read_bytes()))
    return path


@pytest.mark.parametrize("stem", STEMS)
def test_acelyzer_verifies_the_trace(stem, tmp_path):
    out = tmp_path / "verify.json"
    done = acelyzer("-V", "-i", str(_trace(stem, tmp_path)), "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(out.read_text())["result"] == "PASS"


@pytest.mark.parametrize("stem", ["gemm_1024_32core", "mlp_gelu_kernels", "softmax_lx_kernels"])
def test_acelyzer_pt_utilization_is_the_reports(stem, tmp_path):
    trace = _trace(stem, tmp_path)
    ideal = tmp_path / "ideal"
    shutil.copytree(TRACES / f"{stem}_ideal_cycles", ideal)
    out = tmp_path / "out.json"
    done = acelyzer("-i", str(trace), "-c", str(ideal), "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]

    def kernels(path: Path) -> dict:
        events = json.loads(path.read_text())["traceEvents"]
        return {(e["args"]["start_cycle"], e["args"]["stream"]): e["args"] for e in events
                if e["ph"] == "X" and e["name"].endswith(" Cmpt Exec")}

    ours, theirs = kernels(trace), kernels(out)
    assert ours.keys() == theirs.keys()
    for key, args in ours.items():
        mine, analyzer = args["pt_utilization"], theirs[key].get("pt_active", 0.0)  # absent when 0
        assert abs(analyzer - mine) <= 0.01 * mine, (key, mine, analyzer)
    assert any(a["pt_utilization"] > 0 for a in ours.values()) == (stem != "softmax_lx_kernels")
