"""Fuzzing every other subcommand (gemm, compare, check, plot, import-sdsc, validate) and the front end's
options, under the house rules of test_fuzz.py: exit 0, 1 (compare, check: slower) or 2 with one line, no
traceback, no hang, no file outside out/ (the case's cwd is an empty folder that must stay empty), no
temporary or partial file. Sizes follow FUZZ_CASES as in test_fuzz.py."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spyre_emu.cli import main
from spyre_emu.validation.measurements import MEASUREMENTS, PROGRAMS
from tests.cli.mutations import NASTY_INTS, VALUES, mutated
from tests.cli.test_fuzz import BUDGET_S, CASES, FUZZ, MAX_CYCLES, SMALL_PROGRAM, Hang, _budget, _log
from tests.conftest import ROOT, SHARED

CONFIGS = [str(ROOT / "configs" / n) for n in ("tiny.toml", "spyre.toml", "plain-systolic.toml")]
SET_KEYS = ["pt.dataflow", "pt.pe_rows", "cores.count", "clock.ghz", "dram.interleave_bytes", "x", ""]
INTS = st.one_of(st.sampled_from([str(n) for n in NASTY_INTS]), st.integers(-5, 300).map(str), st.text(max_size=5))
NUMBERS = st.one_of(INTS, st.sampled_from(["nan", "inf", "-inf", "1e400", "-0.0", "12.5"]))
SETS = st.lists(st.tuples(st.sampled_from(SET_KEYS), st.one_of(NUMBERS, st.sampled_from(["os", "ws", "is"]))),
                max_size=2).map(lambda kv: [a for k, v in kv for a in ("--set", f"{k}={v}")])
SDSC = SHARED / "sdsc-examples"
SDSC_SEEDS = {p.parent.name: json.loads(p.read_text()) for p in sorted(SDSC.glob("*/sdsc_0.json"))}


def run_argv(tmp: Path, argv: list[str], what: object) -> int:
    """Run ``main(argv)`` from an empty cwd/; every written file must be in out/."""
    out, cwd = tmp / "out", tmp / "cwd"
    for folder in (out, cwd):
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir()
    before = sorted(p for p in tmp.rglob("*") if out not in p.parents)
    stdout, stderr = io.StringIO(), io.StringIO()
    try:
        with contextlib.chdir(cwd), contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr), \
                _budget(BUDGET_S):
            code = main(argv)
    except Hang as exc:
        _log("hang", str(what))
        pytest.fail(f"{exc}: {what}")
    err = stderr.getvalue()
    _log(code, f"{argv[0]}: {err[:160]}")
    assert code in ((0, 1, 2) if argv[0] in ("compare", "check") else (0, 2)), (code, err, what)
    assert sorted(p for p in tmp.rglob("*") if out not in p.parents) == before, what  # nothing outside out/
    written = sorted(p.name for p in out.rglob("*"))
    assert not [n for n in written if n.endswith(".tmp")], (written, what)
    if code == 2:
        assert len(err.splitlines()) == 1, (err, what)
        assert err.startswith("spyre-emu: error: "), (err, what)
        assert written == [], (written, what)
    else:
        assert "Traceback" not in err, (err, what)
    return code


@pytest.fixture(scope="module")
def tmp(tmp_path_factory):
    """The cases' folder, with a real report (the compare and plot seeds); the engine is compiled first."""
    folder = tmp_path_factory.mktemp("fuzz_commands")
    assert main(["run", str(SMALL_PROGRAM), "--quiet", "--json", str(folder / "report.json")]) == 0
    return folder


def _report(tmp: Path) -> dict:
    return json.loads((tmp / "report.json").read_text())


@settings(FUZZ, max_examples=max(1, CASES // 10))
@given(dims=st.lists(st.one_of(st.sampled_from(["64", "128", "256"]), INTS), min_size=3, max_size=3),
       dtype=st.sampled_from(["fp16", "bf16", "fp8", "int8", "fp32", "x", ""]), cores=st.one_of(st.none(), INTS),
       config=st.sampled_from(CONFIGS), sets=SETS)
def test_gemm(tmp, dims, dtype, cores, config, sets):
    argv = ["gemm", "--m", dims[0], "--n", dims[1], "--k", dims[2], "--dtype", dtype, "--config", config, *sets,
            "--max-cycles", MAX_CYCLES, "--quiet", "--json", str(tmp / "out" / "r.json")]
    run_argv(tmp, argv + (["--cores", cores] if cores is not None else []), argv)


def _mutated_report(draw: st.DrawFn, tmp: Path, name: str) -> str:
    _, text, _ = draw(mutated({"report": _report(tmp)}))
    path = tmp / name
    path.write_bytes(text if draw(st.booleans()) else json.dumps(_report(tmp)).encode())
    return str(path)


@settings(FUZZ, max_examples=max(1, CASES // 10))
@given(data=st.data(), pct=st.one_of(st.none(), NUMBERS))
def test_compare(tmp, data, pct):
    base, new = (_mutated_report(data.draw, tmp, n) for n in ("base.json", "new.json"))
    argv = ["compare", base, new, *(["--fail-if-slower", pct] if pct is not None else [])]
    run_argv(tmp, argv, (argv, Path(base).read_bytes()[:500], Path(new).read_bytes()[:500]))


@settings(FUZZ, max_examples=max(1, CASES // 20))
@given(data=st.data(), pct=NUMBERS, sets=SETS)
def test_check(tmp, data, pct, sets):
    base = _mutated_report(data.draw, tmp, "base.json")
    argv = ["check", str(SMALL_PROGRAM), "--baseline", base, "--tolerance", pct, "--config", CONFIGS[0], *sets,
            "--json", str(tmp / "out" / "new.json")]
    run_argv(tmp, argv, (argv, Path(base).read_bytes()[:500]))


@settings(FUZZ, max_examples=max(1, CASES // 20))
@given(data=st.data(), kind=st.sampled_from(["gantt", "heatmap", "roofline", "ring", "pie", ""]),
       suffix=st.sampled_from([".png", ".svg", ".pdf", ".txt", ""]))
def test_plot(tmp, data, kind, suffix):
    report = _mutated_report(data.draw, tmp, "plot.json")
    argv = ["plot", report, "--kind", kind, "-o", str(tmp / "out" / f"p{suffix}")]
    run_argv(tmp, argv, (argv, Path(report).read_bytes()[:500]))


@settings(FUZZ, max_examples=max(1, CASES // 20))
@given(case=mutated(SDSC_SEEDS or {"none": {}}), extra=st.booleans())
def test_import_sdsc(tmp, case, extra):
    if not SDSC_SEEDS:
        pytest.skip(f"{SDSC} not present")
    _, text, done = case
    folder = tmp / "sdsc"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "sdsc_0.json").write_bytes(text)
    if extra:
        (folder / "bundle.mlir").write_bytes(text[:300])
    run_argv(tmp, ["import-sdsc", str(folder), "-o", str(tmp / "out" / "p.json")], (done, text[:2000]))


@settings(FUZZ, max_examples=max(1, CASES // 50))
@given(only=st.lists(st.one_of(st.sampled_from([m.name for m in MEASUREMENTS]), st.text(max_size=6)), max_size=2),
       programs=st.sampled_from(["real", "empty", "broken"]), config=st.sampled_from(CONFIGS[:2]), sets=SETS)
def test_validate(tmp, only, programs, config, sets):
    folder = tmp / "programs"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    if programs == "broken":
        for path in PROGRAMS.glob("*.json"):
            (folder / path.name).write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])
    argv = ["validate", *[a for name in only for a in ("--only", name)], "--config", config, *sets, "--quiet",
            "--out", str(tmp / "out" / "v.md"), "--programs", str(PROGRAMS if programs == "real" else folder)]
    if programs == "real" and not only:
        argv[1:1] = ["--only", "nope"]  # the whole calibration takes minutes
    run_argv(tmp, argv, argv)


OPTION_VALUES = st.one_of(VALUES, st.sampled_from(["cpu", "error", "configs/tiny.toml", "t.json"]),
                          st.integers(-2, 40))
OPTIONS = st.dictionaries(st.sampled_from(["machine", "set", "cores", "functional", "trace", "fallback",
                                           "print_report", "colour"]), OPTION_VALUES, max_size=3)


@settings(FUZZ, max_examples=max(1, CASES // 50))
@given(options=OPTIONS, model=st.sampled_from(["linear_relu", "cumsum", "softmax"]))
def test_frontend_options(tmp, options, model):
    """torch.compile with drawn options: a result or a SpyreEmuError (Dynamo wraps it), nothing else."""
    torch = pytest.importorskip("torch")
    from spyre_emu.errors import SpyreEmuError  # noqa: PLC0415
    torch.manual_seed(0)
    modules = {"linear_relu": lambda: torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU()),
               "cumsum": lambda: _Lambda(lambda x: torch.cumsum(x, 0)),
               "softmax": lambda: _Lambda(lambda x: torch.softmax(x, -1))}
    cwd = tmp / "cwd"
    shutil.rmtree(cwd, ignore_errors=True)
    cwd.mkdir()
    torch._dynamo.reset()
    with contextlib.chdir(cwd), _budget(BUDGET_S * 3), torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
        try:
            torch.compile(modules[model]().half(), backend="spyre_emu", options=options)(torch.randn(8, 64).half())
            _log(0, f"frontend: {options}")
        except Exception as exc:  # noqa: BLE001 -- the assertion below is the point
            inner = getattr(exc, "inner_exception", exc)
            _log(2, f"frontend: {inner}"[:160])
            assert isinstance(inner, SpyreEmuError), (options, model, repr(inner))
            assert len(str(inner).splitlines()) == 1, str(inner)
    trace = options.get("trace")
    named = {Path(trace).name, f"{Path(trace).stem}_ideal_cycles"} if isinstance(trace, str) and trace else set()
    assert {p.name for p in cwd.iterdir()} <= named, options  # only the trace asked for


class _Lambda:
    """A module from a function (one op), built only once torch is imported."""

    def __new__(cls, fn):
        import torch  # noqa: PLC0415

        class Module(torch.nn.Module):
            def forward(self, x):
                return fn(x)
        return Module()
