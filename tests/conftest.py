"""Shared fixtures: machines and a helper that runs a tiny unit program."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from spyre_emu.config import load_machine
from spyre_emu.engine import simulate
from spyre_emu.numerics import from_f32, to_f32
from spyre_emu.unit_program import parse_unit_program

ROOT = Path(__file__).resolve().parents[1]
# Tests simulate afresh; tests/test_memo.py turns the result cache on, in a temporary directory.
os.environ["SPYRE_EMU_RESULT_CACHE"] = "0"
SHARED = ROOT.parent / "shared"
ACELYZER = shutil.which("acelyzer", path=str(Path(sys.executable).parent)) or shutil.which("acelyzer")


def acelyzer(*args: str) -> subprocess.CompletedProcess:
    """IBM's trace analyzer on ``args``: skipped where it is not installed, a failure under CI."""
    if ACELYZER is None:
        if os.environ.get("CI") == "true":
            pytest.fail("acelyzer is missing under CI: pip install -e '.[test]' installs aiu-trace-analyzer")
        pytest.skip("acelyzer not installed (pip install aiu-trace-analyzer)")
    return subprocess.run([ACELYZER, *args], capture_output=True, text=True, timeout=600, check=False)


def assert_acelyzer_verifies(trace: Path, folder: Path) -> None:
    """``acelyzer -V`` on ``trace`` passes (its verdict written in ``folder``)."""
    out = folder / "verify.json"
    done = acelyzer("-V", "-i", str(trace), "-o", str(out))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert json.loads(out.read_text())["result"] == "PASS"


def card_fp16(values):
    """Values as the card stores fp16 (DLFloat16: 9 fraction bits, ties away from zero), as float32:
    what a kernel's fp16 result holds, and host fp16 data once it is on the card."""
    values = np.asarray(values, np.float32)
    return to_f32(from_f32(values.reshape(-1), "fp16"), "fp16").reshape(values.shape)


def load_script(path: Path) -> ModuleType:
    """Import a script (examples/make_programs.py, traces/make_traces.py) as a module without writing
    bytecode: a __pycache__/ beside it would land in folders that tests compare with their expected listing."""
    module = ModuleType(path.stem)
    module.__file__ = str(path)
    sys.modules[path.stem] = module  # a dataclass in the script looks its module up there
    exec(compile(path.read_text(encoding="utf-8"), path, "exec"), module.__dict__)
    return module


def program(cores: dict[int, dict], buffers: dict | None = None, host: list | None = None) -> dict:
    """A unit program dict from {core: {unit: [instructions]}}."""
    data = {"format": "spyre-emu.unit-program", "version": 1, "buffers": buffers or {},
            "cores": [{"core": c, "units": units} for c, units in sorted(cores.items())]}
    if host:
        data["host"] = host
    return data


@pytest.fixture(scope="session")
def tiny():
    return load_machine(ROOT / "configs" / "tiny.toml")


@pytest.fixture(scope="session")
def tiny_with():
    """The tiny card with ``KEY=VALUE`` overrides."""
    return lambda *overrides: load_machine(ROOT / "configs" / "tiny.toml", list(overrides))


@pytest.fixture(scope="session")
def spyre():
    return load_machine()


@pytest.fixture
def run_units():
    """Simulate a program dict on a machine; returns the EventLog."""
    def _run(machine, cores, buffers=None, host=None, **kwargs):
        return simulate(parse_unit_program(program(cores, buffers, host), machine), machine, **kwargs)
    return _run


def require_shared() -> Path:
    """../shared/ (beside the clone): skip without it, but fail under CI."""
    if not SHARED.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SHARED} is missing under CI")
        pytest.skip(f"{SHARED} not present")
    return SHARED


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", default=False,
                     help="also run the long differential runs (engine vs simpy reference)")


CALIBRATION_COLUMNS = ["role", "phase", "B", "M", "N", "K", "split_b", "split_m", "split_n", "split_k", "cores",
                       "device_us"]


def calibration_folder(folder: Path, rows, singles=()) -> Path:
    """A calibration folder as validate --data reads it: sweep ``rows`` (role, phase, B, M, N, K, split), each
    measured at 100 µs, and ``singles`` as the entries of measurements.json."""
    with open(folder / "matmul_split_sweep.csv", "w", newline="") as f:
        out = csv.writer(f)
        out.writerow(CALIBRATION_COLUMNS)
        out.writerows([role, phase, b, m, n, k, *split, math.prod(split), 100.0]
                      for role, phase, b, m, n, k, split in rows)
    (folder / "measurements.json").write_text(json.dumps({"cases": list(singles)}))
    return folder
