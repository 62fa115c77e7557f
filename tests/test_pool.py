"""The process pool (spyre_emu.pool): independent programs simulated side by side equal serial runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np

from spyre_emu import pipeline, pool
from tests.conftest import ROOT

PROGRAMS = ["mlp_gelu_kernels.json", "softmax_lx_kernels.json", "row_sum_split_kernels.json"]


def test_parallel_map_keeps_the_order(monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "2")
    try:
        assert pool.parallel_map(abs, [-3, 2, -1, 0]) == [3, 2, 1, 0]
    finally:
        pool.shutdown()


def test_programs_simulated_in_the_pool_equal_serial_runs(spyre, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_WORKERS", "2")
    monkeypatch.setattr(pipeline, "POOL_MIN_INSTRUCTIONS", 0)
    programs = [pipeline.load(ROOT / "examples" / "programs" / name, spyre) for name in PROGRAMS]
    try:
        parallel = pipeline.timings(programs, spyre, cache=False)
    finally:
        pool.shutdown()
    for program, (log, report) in zip(programs, parallel, strict=True):
        serial = pipeline.run(program, spyre, cache=False)
        assert report.to_json() == serial.report.to_json()
        assert np.array_equal(log.end, serial.log.end)
        assert np.array_equal(log.start, serial.log.start)
        assert log.instructions == serial.log.instructions


def test_a_script_without_a_main_guard_runs_in_the_pool(tmp_path):
    """multiprocessing would run such a script again in each new worker, which there starts a pool of its own."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent("""
        import os
        os.environ["SPYRE_EMU_WORKERS"] = "2"
        from spyre_emu import pool
        print(pool.parallel_map(abs, [-3, 2, -1, 0]))
    """))
    done = subprocess.run([sys.executable, str(script)], check=False, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["[3, 2, 1, 0]"]
