"""IBM's trace analyzer (aiu-trace-analyzer, command acelyzer) on the reference timelines in traces/:
its verification passes on every example, and its PT utilization is the report's within 1 %.

Each run takes one to four seconds; -c runs on the two examples with PT work and one without.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.results.runs import STEMS

TRACES = ROOT / "traces"
ACELYZER = shutil.which("acelyzer", path=str(Path(sys.executable).parent)) or shutil.which("acelyzer")


def _acelyzer(*args: str) -> subprocess.CompletedProcess:
    if ACELYZER is None:
        if os.environ.get("CI") == "true":
            pytest.fail("acelyzer is missing under CI: pip install -e '.[test]' installs aiu-trace-analyzer")
        pytest.skip("acelyzer not installed (pip install aiu-trace-analyzer)")
    return subprocess.run([ACELYZER, *args], capture_output=True, text=True, timeout=600, check=False)


def _trace(stem: str, folder: Path) -> Path:
    path = folder / f"{stem}.json"
    path.write_bytes(gzip.decompress((TRACES / f"{stem}.json.gz").read_bytes()))
    return path


@pytest.mark.parametrize("stem", STEMS)
def test_acelyzer_verifies_the_trace(stem, tmp_path):
    out = tmp_path / "verify.json"
    done = _acelyzer("-V", "-i", str(_trace(stem, tmp_path)), "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(out.read_text())["result"] == "PASS"


@pytest.mark.parametrize("stem", ["gemm_1024_32core", "mlp_gelu_kernels", "softmax_lx_kernels"])
def test_acelyzer_pt_utilization_is_the_reports(stem, tmp_path):
    trace = _trace(stem, tmp_path)
    ideal = tmp_path / "ideal"
    shutil.copytree(TRACES / f"{stem}_ideal_cycles", ideal)
    out = tmp_path / "out.json"
    done = _acelyzer("-i", str(trace), "-c", str(ideal), "-o", str(out))
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
