"""The plain array against SCALE-Sim v3 itself, when it is installed: same Total Cycles, same utilization.

SCALE-Sim is not a dependency. The test runs it in a subprocess with ``$SCALESIM_PYTHON`` (an
interpreter where ``pip install scalesim`` worked; SCALE-Sim 3.0.0 needs numpy < 2.4) or else this
interpreter, and skips when neither imports it. Each GEMM runs in CALC mode in a temporary folder.
"""

import json
import os
import subprocess
import sys
from itertools import product

import pytest

from spyre_emu.gemm import run_gemm
from tests.engine.test_systolic import plain

PYTHON = os.environ.get("SCALESIM_PYTHON", sys.executable)
SHAPES = [(16, 16, 16), (37, 23, 51), (100, 70, 9), (5, 129, 64), (1, 1, 1), (64, 64, 64)]
ARRAYS = [(8, 8), (16, 8), (4, 12)]

CONFIG = """[general]
run_name = run
[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 64
FilterSramSzkB: 64
OfmapSramSzkB: 64
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: 10
Dataflow: {dataflow}
MemoryBanks: 1
ReadRequestBuffer: 32
WriteRequestBuffer: 32
[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2
[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40
[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
"""

# Runs SCALE-Sim on each case (a folder holding c.cfg and t.csv) and prints its COMPUTE_REPORT rows.
SCRIPT = """
import contextlib, csv, io, json, sys
from scalesim.scale_sim import scalesim
rows = []
for folder in sys.argv[1:]:
    with contextlib.redirect_stdout(io.StringIO()):
        sim = scalesim(save_disk_space=True, verbose=False, config=folder + "/c.cfg", topology=folder + "/t.csv",
                       layout=folder + "/l.csv", input_type_gemm=True)
        sim.run_scale(top_path=folder)
    rows.append([x.strip() for x in list(csv.reader(open(folder + "/run/COMPUTE_REPORT.csv")))[1]])
print(json.dumps(rows))
"""


def _scalesim_or_skip() -> None:
    found = subprocess.run([PYTHON, "-c", "import scalesim"], capture_output=True, check=False)
    if found.returncode:
        pytest.skip(f"SCALE-Sim is not importable by {PYTHON} (pip install scalesim, or set SCALESIM_PYTHON)")


def test_plain_array_matches_scalesim(tmp_path):
    _scalesim_or_skip()
    cases = [(*shape, *array, df) for shape, array, df in product(SHAPES, ARRAYS, ("os", "ws", "is"))]
    folders = []
    for i, (m, n, k, rows, cols, dataflow) in enumerate(cases):
        folder = tmp_path / str(i)
        folder.mkdir()
        (folder / "c.cfg").write_text(CONFIG.format(rows=rows, cols=cols, dataflow=dataflow))
        (folder / "t.csv").write_text(f"Layer, M, N, K,\nL0, {m}, {n}, {k},\n")
        (folder / "l.csv").write_text("Layer,\n")
        folders.append(str(folder))
    done = subprocess.run([PYTHON, "-c", SCRIPT, *folders], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    for case, row in zip(cases, json.loads(done.stdout), strict=True):
        m, n, k, rows, cols, dataflow = case
        report = run_gemm(m, n, k, plain(rows, cols, dataflow))
        s = report.data["systolic"]
        assert report.total_cycles == int(row[2]), case  # "Total Cycles"; row[3], the stall cycles, are 0
        assert [s["overall_util_percent"], s["mapping_efficiency_percent"], s["compute_util_percent"]] == \
            pytest.approx([float(x) for x in row[4:7]], abs=1e-5), case
