"""Faults around a run: SIGINT, SIGKILL in the middle of a write, runs writing the same outputs at once, and a
numba cache folder that is unwritable or corrupted. Each run is a real process."""

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from spyre_emu import engine
from spyre_emu.engine import cache
from tests.conftest import ROOT

PROGRAM = ROOT / "docs" / "examples" / "load_exp_store.json"  # --functional writes exp_y.npy
# The child runs the CLI; FAULT makes its first np.save write half the array, then send itself that signal.
# Both children first take SIGINT as an interactive shell leaves it: a test run started as a background job
# (nohup, `cmd &` without job control) inherits SIGINT ignored, and the CLI rightly keeps it ignored then.
CHILD = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
import numpy as np
import spyre_emu.files
fault = os.environ.get("FAULT")
if fault:
    def save(handle, array, allow_pickle):
        handle.write(np.lib.format.magic(1, 0))
        handle.flush()
        os.kill(os.getpid(), getattr(signal, fault))
        np.save(handle, array, allow_pickle=allow_pickle)
    spyre_emu.files.np.save = save
if os.environ.get("FAULT_RENAMING"):  # SIGINT while the outputs are renamed into that folder
    replace = os.replace
    def interrupting(src, dst):
        if os.path.dirname(dst) == os.environ["FAULT_RENAMING"]:
            os.kill(os.getpid(), signal.SIGINT)
        replace(src, dst)
    os.replace = interrupting
from spyre_emu.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _run(out: Path, fault: str | None = None, **env: str) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-c", CHILD, "run", str(PROGRAM), "--quiet", "--functional", "--output-dir", str(out),
            "--json", str(out / "r.json"), "--trace", str(out / "t.json")]
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=300, cwd=out.parent,
                          env={**os.environ, **env, **({"FAULT": fault} if fault else {})})


def _complete(out: Path) -> None:
    assert sorted(p.name for p in out.iterdir()) == ["exp_y.npy", "r.json", "t.json", "t_ideal_cycles"]
    assert np.load(out / "exp_y.npy").shape == (32, 64)
    assert json.loads((out / "r.json").read_text())["total_cycles"] > 0
    assert json.loads((out / "t.json").read_text())["traceEvents"]
    assert list((out / "t_ideal_cycles").rglob("*.json"))


def test_sigint_during_a_write_is_one_line_and_leaves_nothing(tmp_path):
    out = tmp_path / "out"
    done = _run(out, "SIGINT")
    assert (done.returncode, done.stderr) == (130, "spyre-emu: interrupted\n")
    assert not out.exists()  # no partial output, no temporary file, not even the --output-dir the run created


def test_sigint_while_outputs_are_renamed_leaves_them_all(tmp_path):
    """SIGINT is held during the renames and lands after the last one. The trace's _ideal_cycles/ folder was swapped
    in after that hold, under a second one: a SIGINT held by the first landed in between, leaving the report and
    the trace without the folder (found reading the code in session 40); it is now renamed under the same hold."""
    out = tmp_path / "out"
    done = _run(out, FAULT_RENAMING=str(out))
    assert (done.returncode, done.stderr) == (130, "spyre-emu: interrupted\n")
    _complete(out)


STARTING = """
import builtins, os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
load = builtins.__import__
def interrupting(name, *args, **kwargs):
    if name == os.environ["INTERRUPT_AT"]:
        os.kill(os.getpid(), signal.SIGINT)
    return load(name, *args, **kwargs)
builtins.__import__ = interrupting
from spyre_emu.entry import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("module", ["numpy", "numba"])
def test_sigint_while_the_cli_loads_is_one_line(tmp_path, module):
    """Ctrl-C in the time the console script spends importing the CLI (numpy and the modules of every command),
    or the first simulation spends importing numba and the jitted loop (inside ``cli.main``)."""
    env = {**os.environ, "INTERRUPT_AT": module, "SPYRE_EMU_RESULT_CACHE": "0"}  # a hit would load no numba
    done = subprocess.run([sys.executable, "-c", STARTING, "run", str(PROGRAM), "--quiet"], capture_output=True,
                          text=True, check=False, timeout=120, cwd=tmp_path, env=env)
    assert (done.returncode, done.stderr) == (130, "spyre-emu: interrupted\n")
    assert list(tmp_path.iterdir()) == []


def test_sigkill_during_a_write_keeps_the_previous_output(tmp_path):
    out = tmp_path / "out"
    assert _run(out).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    done = _run(out, "SIGKILL")
    assert done.returncode == -signal.SIGKILL
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file() and not p.name.startswith(".")} == before
    strays = [p.name for p in out.iterdir() if p.name.startswith(".")]
    assert strays, "the dead run's temporary file"
    assert all(n.endswith(".tmp") for n in strays), strays
    assert _run(out).returncode == 0
    _complete(out)  # and the stray temporary files are gone


def test_concurrent_runs_end_with_one_complete_set_of_files(tmp_path):
    out = tmp_path / "out"
    argv = [sys.executable, "-m", "spyre_emu.cli", "run", str(PROGRAM), "--quiet", "--functional", "--output-dir",
            str(out), "--json", str(out / "r.json"), "--trace", str(out / "t.json")]
    runs = [subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tmp_path) for _ in range(4)]
    results = [(run.wait(timeout=300), run.stderr.read()) for run in runs]
    assert results == [(0, "")] * 4
    _complete(out)


def test_an_unwritable_cache_folder_gives_a_note_and_a_fresh_one(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    fresh = cache._writable(tmp_path / "file" / "numba")
    assert Path(fresh).is_dir()
    assert capsys.readouterr().err.startswith(f"spyre-emu: note: cannot write the numba cache {tmp_path}/file/numba ")


@pytest.mark.slow
def test_a_corrupted_cache_gives_a_note_and_compiles_afresh(tmp_path):
    """Truncated cache files made numba's unpickling raise EOFError out of the first simulation (a traceback)."""
    root = tmp_path / "cache"
    shutil.copytree(engine.CACHE_DIR, root / Path(engine.CACHE_DIR).name)
    for path in root.rglob("*.nbc"):
        path.write_bytes(b"")
    out = tmp_path / "out"
    done = _run(out, SPYRE_EMU_CACHE=str(root))
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith(f"spyre-emu: note: the numba cache {root / Path(engine.CACHE_DIR).name} is "
                                  "unreadable (EOFError); compiling afresh\n"), done.stderr
    _complete(out)
    assert _run(out, SPYRE_EMU_CACHE=str(root)).stderr == ""  # the fresh cache is whole
