"""`spyre-emu compare` and `spyre-emu check`: per-kernel diff tables, exit 1 past the threshold, and
one-line errors (exit 2) for bad input."""

from __future__ import annotations

import json

import pytest

from spyre_emu.cli import main
from spyre_emu.results.compare import Row, compare, render
from tests.conftest import ROOT

RING = ROOT / "examples" / "programs" / "ring_move_128k.json"


def _report(total: int, **kernels: int) -> dict:
    return {"format": "spyre-emu.report", "version": 1, "total_cycles": total,
            "kernels": [{"name": n, "cycles": c} for n, c in kernels.items()]}


def test_rows_and_table():
    rows = compare(_report(1000, a=600, b=400), _report(1100, a=600, b=500, c=10))
    assert rows == [Row("(program)", 1000, 1100), Row("a", 600, 600), Row("b", 400, 500), Row("c", None, 10)]
    assert [r.change_pct for r in rows] == [10.0, 0.0, 25.0, None]
    assert render(rows, 12.0).splitlines() == [
        "kernel      base cycles    new cycles    change  status",
        "(program)         1,000         1,100   +10.00%  slower",
        "a                   600           600    +0.00%  same",
        "b                   400           500   +25.00%  SLOWER",
        "c                     -            10            new",
        "1 of 4 rows slower than the baseline by more than 12%"]


@pytest.fixture
def reports(tmp_path):
    def write(name: str, data) -> str:
        path = tmp_path / name
        path.write_text(json.dumps(data))
        return str(path)
    return write


@pytest.mark.parametrize(("threshold", "code"), [(None, 0), ("25", 0), ("24.9", 1), ("0", 1)])
def test_compare_exit_status(reports, capsys, threshold, code):
    base, new = reports("base.json", _report(1000, a=400)), reports("new.json", _report(1000, a=500))
    extra = [] if threshold is None else ["--fail-if-slower", threshold]
    assert main(["compare", base, new, *extra]) == code
    assert "+25.00%" in capsys.readouterr().out


@pytest.mark.parametrize(("data", "extra", "message"), [
    (None, [], "cannot read"),
    ([1, 2], [], "not a spyre-emu report"),
    ({"format": "spyre-emu.report", "total_cycles": 1}, [], "not a spyre-emu report (total_cycles and kernels"),
    (_report(1, a=1), ["--fail-if-slower", "-1"], "--fail-if-slower: must be a percentage of 0 or more"),
    (_report(1, a=1), ["--fail-if-slower", "nan"], "must be a percentage"),
    (_report(1, a=1), ["--fail-if-slower", "lots"], "invalid float value"),
])
def test_compare_bad_input(reports, tmp_path, capsys, data, extra, message):
    good = reports("good.json", _report(1, a=1))
    bad = str(tmp_path / "missing.json") if data is None else reports("bad.json", data)
    assert main(["compare", good, bad, *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spyre-emu: error: "), err
    assert err.count("\n") == 1, err
    assert message in err, err


def test_check_runs_and_compares(tmp_path, capsys):
    baseline = tmp_path / "baseline.json"
    assert main(["run", str(RING), "--json", str(baseline), "--quiet"]) == 0
    assert main(["check", str(RING), "--baseline", str(baseline)]) == 0
    assert "no row slower than the baseline by more than 0%" in capsys.readouterr().out
    data = json.loads(baseline.read_text())
    data["total_cycles"] = int(data["total_cycles"] / 1.05)  # the run is now 5 % slower than this baseline
    baseline.write_text(json.dumps(data))
    assert main(["check", str(RING), "--baseline", str(baseline), "--tolerance", "4"]) == 1
    assert main(["check", str(RING), "--baseline", str(baseline), "--tolerance", "6"]) == 0
    new = tmp_path / "new.json"
    assert main(["check", str(RING), "--baseline", str(baseline), "--tolerance", "6", "--json", str(new)]) == 0
    assert json.loads(new.read_text())["total_cycles"] > data["total_cycles"]
    assert main(["check", str(RING), "--baseline", str(tmp_path / "nope.json")]) == 2


@pytest.mark.parametrize("names", [["a", "a"], ["a", "(program)"]])
def test_a_report_with_two_rows_of_one_name_is_refused(reports, capsys, names):
    """The second row of a name vanished from the comparison (a dict keyed by name)."""
    data = {**_report(10), "kernels": [{"name": n, "cycles": 5} for n in names]}
    path = reports("dup.json", data)
    assert main(["compare", path, path]) == 2
    assert capsys.readouterr().err == (f"spyre-emu: error: {path}: kernels[1].name: kernel {names[1]!r} has two rows; "
                                       "compare needs one row per name\n")


@pytest.mark.parametrize(("first", "second"), [("softmax", "softmax"), ("k1", None)])
def test_two_kernels_of_one_name_are_refused(tmp_path, capsys, first, second):
    """Two kernels named alike were merged into one report row: the second vanished from the table,
    from compare and from check. (An unnamed kernel is k<index>: kernels[1] is k1.)"""
    program = json.loads((ROOT / "examples" / "programs" / "add_exp_kernels.json").read_text())
    program["kernels"] = [dict(program["kernels"][0], name=first), dict(program["kernels"][0])]
    program["kernels"][1].pop("name", None)
    if second:
        program["kernels"][1]["name"] = second
    path = tmp_path / "p.json"
    path.write_text(json.dumps(program))
    assert main(["run", str(path), "--quiet"]) == 2
    assert capsys.readouterr().err == (f"spyre-emu: error: {path}: kernels[1].name: kernel name {first!r} is already "
                                       "used by kernels[0]\n")
