"""What the CLI loads before it works (docs/speed.md, session 40): numba with the first simulation, matplotlib
with the first plot; a program whose result is in the result cache loads no numba at all."""

import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

from spyre_emu import engine
from spyre_emu.config import load_machine
from spyre_emu.engine import simulate
from spyre_emu.unit_program import parse_unit_program
from tests.conftest import ROOT, program

HEAVY = ("numba", "llvmlite", "matplotlib")
LOADED = f"import sys; print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
RUN = ("import sys; from spyre_emu.cli import main; code = main(sys.argv[1:]); " + LOADED
       + "; sys.exit(code)")


def test_the_cli_loads_neither_numba_nor_matplotlib():
    code = "import spyre_emu.cli; " + LOADED
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert done.stdout == "[]\n"


def test_a_run_found_in_the_result_cache_loads_no_numba(tmp_path):
    machine = load_machine()
    simulate(parse_unit_program(program({0: {"sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 1}]}}), machine),
             machine)
    cache = tmp_path / "cache"  # this process's compiled engine, so the first run below compiles nothing
    shutil.copytree(engine.CACHE_DIR, cache / Path(engine.CACHE_DIR).name)
    env = {**os.environ, "SPYRE_EMU_CACHE": str(cache), "SPYRE_EMU_RESULT_CACHE": "1"}
    argv = [sys.executable, "-c", RUN, "run", str(ROOT / "examples" / "programs" / "ring_move_128k.json"), "--quiet"]
    first = subprocess.run(argv, capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    assert first.stdout == "['llvmlite', 'numba']\n"  # simulated
    again = subprocess.run(argv, capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    assert again.stdout == "[]\n"  # the result cache's answer


def test_the_start_up_benchmark_times_a_result_cache_hit(monkeypatch):
    """engine_speed.py's ``cli_hit`` row is a hit even from a shell with ``SPYRE_EMU_RESULT_CACHE=0``, and its
    ``cli_sim`` row simulates (the commands are recorded, not run)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    engine_speed = importlib.import_module("engine_speed")
    calls = []
    monkeypatch.setattr(engine_speed, "run_timed", lambda cmd, cwd, env: calls.append((cmd, env)) or (1.0, 1.0))
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    engine_speed.starts(ROOT)
    cli = [env.get("SPYRE_EMU_RESULT_CACHE") for cmd, env in calls if cmd[-1] == "--quiet"]
    assert cli == ["1"] * 4 + ["0"] * 3  # the result into the cache, three hits; three simulating runs
