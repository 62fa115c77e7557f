"""Fuzzing the CLI: broken programs and configs end with exit 0 or 2 and one line, never a traceback,
a hang or a partial output file.

Every case runs ``spyre-emu run`` in-process with --max-cycles and a wall-clock budget. CI runs about
300 cases, derandomized; ``FUZZ_CASES=10000`` runs that many with fresh random draws (and
``FUZZ_BUDGET_S`` sets the per-case budget, default 20 s; ``FUZZ_LOG`` collects the outcomes).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from spyre_emu.cli import main
from tests.cli.mutations import VALUES, mutated, toml_text
from tests.conftest import ROOT

CASES = int(os.environ.get("FUZZ_CASES", "300"))
BUDGET_S = float(os.environ.get("FUZZ_BUDGET_S", "20"))
LOG = os.environ.get("FUZZ_LOG")  # a file to append each case's exit status and message to
MAX_CYCLES = "200000"
EXAMPLES = [*sorted((ROOT / "examples" / "programs").glob("*.json")),
            *sorted((ROOT / "docs" / "examples").glob("*.json"))]
BIG = {"gemm_1024_32core"}  # 740 KB of instructions: too slow to mutate a few hundred times
SEEDS = {p.stem: json.loads(p.read_text()) for p in EXAMPLES if p.stem not in BIG}
UNIT_SEEDS = {k: v for k, v in SEEDS.items() if v["format"] == "spyre-emu.unit-program"}
KERNEL_SEEDS = {k: v for k, v in SEEDS.items() if v["format"] == "spyre-emu.kernel-program"}
TINY = tomllib.loads((ROOT / "configs" / "tiny.toml").read_text())
SMALL_PROGRAM = ROOT / "docs" / "examples" / "load_exp_store.json"
# No shrinking: a failing case is reported as drawn (shrinking would rerun cases that may each take the budget).
FUZZ = settings(max_examples=max(1, CASES * 2 // 5), deadline=None, database=None,
                derandomize="FUZZ_CASES" not in os.environ, suppress_health_check=list(HealthCheck),
                phases=[Phase.explicit, Phase.reuse, Phase.generate])


class Hang(BaseException):
    """Raised by the alarm: a case ran past its budget (BaseException, so no handler in main swallows it)."""


@contextlib.contextmanager
def _budget(seconds: float):
    def alarm(signum, frame):
        raise Hang(f"no answer within {seconds} s")
    previous = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_case(tmp: Path, program: bytes, *extra: str, what: object = None) -> int:
    """Run one case in a fresh folder and check the house rules; returns the exit status."""
    out = tmp / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    prog = tmp / "prog.json"
    prog.write_bytes(program)
    argv = ["run", str(prog), "--quiet", "--max-cycles", MAX_CYCLES, "--json", str(out / "report.json"),
            "--trace", str(out / "trace.json"), "--output-dir", str(out), *extra]
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), _budget(BUDGET_S):
            code = main(argv)
    except Hang as exc:
        _log("hang", str(what))
        pytest.fail(f"{exc}: {what}")
    err, written = stderr.getvalue(), sorted(p.name for p in out.iterdir())
    _log(code, err[:160])
    assert code in (0, 2), (code, err, what)
    assert stdout.getvalue() == "", what
    if code == 2:
        assert len(err.splitlines()) == 1, (err, what)
        assert err.startswith("spyre-emu: error: "), (err, what)
        assert written == [], (written, what)  # nothing, not even a temporary file
    else:
        assert err == "", (err, what)
        assert {"report.json", "trace.json"} <= set(written), (written, what)
        assert isinstance(json.loads((out / "report.json").read_text())["total_cycles"], int)
    return code


def _log(outcome: object, text: str) -> None:
    if LOG:
        with open(LOG, "a", encoding="utf-8") as log:
            log.write(json.dumps([outcome, text]) + "\n")


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    """The cases' folder; the engine is compiled first (a cold numba compile is not the case's time)."""
    folder = tmp_path_factory.mktemp("fuzz")
    assert main(["run", str(SMALL_PROGRAM), "--quiet"]) == 0
    return folder


@FUZZ
@given(case=mutated(UNIT_SEEDS))
def test_mutated_unit_programs(tmp, case):
    name, text, done = case
    run_case(tmp, text, what=(name, done, text[:2000]))


@FUZZ
@given(case=mutated(KERNEL_SEEDS))
def test_mutated_kernel_programs(tmp, case):
    name, text, done = case
    run_case(tmp, text, what=(name, done, text[:2000]))


@settings(FUZZ, max_examples=max(1, CASES // 5))
@given(case=mutated({"tiny": TINY}), truncate=st.booleans(), cut=st.integers(0, 2000))
def test_mutated_configs(tmp, case, truncate, cut):
    _, text, done = case
    try:
        config = toml_text(json.loads(text))
    except (json.JSONDecodeError, UnicodeDecodeError, AttributeError):
        config = text.decode("utf-8", "replace")  # already broken: use the raw text
    if truncate:
        config = config[:cut]
    cfg = tmp / "cfg.toml"
    cfg.write_text(config)
    run_case(tmp, SMALL_PROGRAM.read_bytes(), "--config", str(cfg), what=(done, config))


def _keys(node: dict, at: str = "") -> list[str]:
    return [k for key, v in node.items() for k in (_keys(v, f"{at}{key}.") if isinstance(v, dict) else [f"{at}{key}"])]


@settings(FUZZ, max_examples=max(1, CASES // 10))
@given(sets=st.lists(st.tuples(st.one_of(st.sampled_from(_keys(TINY)), st.text(max_size=8)), VALUES), min_size=1,
                     max_size=3), raw=st.booleans())
def test_random_set_overrides(tmp, sets, raw):
    args = []
    for key, value in sets:
        text = value if isinstance(value, str) and raw else json.dumps(value)
        args += ["--set", f"{key}={text}"]
    run_case(tmp, SMALL_PROGRAM.read_bytes(), "--config", str(ROOT / "configs" / "tiny.toml"), *args, what=args)
