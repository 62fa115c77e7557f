"""`spyre-emu plot`: an image per kind; bad input is one stderr line, exit 2, and no file written."""

import json

import pytest

from spyre_emu.cli import main
from tests.conftest import ROOT
from tests.results.reports import REPORT

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def report(tmp_path):
    path = tmp_path / "report.json"
    path.write_text(json.dumps(REPORT))
    return path


@pytest.mark.parametrize("kind", ["gantt", "heatmap", "roofline", "ring"])
def test_each_kind_writes_a_png(report, tmp_path, kind):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", str(report), "--kind", kind, "-o", str(out)]) == 0
    assert out.read_bytes().startswith(PNG)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left behind


def test_the_suffix_picks_the_format(report, tmp_path):
    out = tmp_path / "heatmap.svg"
    assert main(["plot", str(report), "--kind", "heatmap", "-o", str(out)]) == 0
    assert b"<svg" in out.read_bytes()[:1000]


@pytest.mark.parametrize(("args", "says"), [
    (["missing.json", "--kind", "gantt"], "missing.json: cannot read"),
    ([str(ROOT / "examples/programs/ring_move_128k.json"), "--kind", "gantt"],
     "ring_move_128k.json: total_cycles: missing: not a spyre-emu report"),
    (["REPORT", "--kind", "pie"], "--kind: unknown kind 'pie'; expected one of gantt, heatmap, roofline, ring"),
    (["REPORT", "--kind", "ring", "-o", "nowhere/x.png"], "nowhere/x.png: cannot write"),
    (["REPORT", "--kind", "ring", "-o", "out.xyz"], "out.xyz: unknown image format 'xyz'"),
    (["REPORT", "--kind", "ring", "-o", "folder.png"], "folder.png: cannot write: Is a directory"),
])
def test_bad_input_is_one_line_and_exit_2(report, tmp_path, capsys, monkeypatch, args, says):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "folder.png").mkdir()
    args = [str(report) if a == "REPORT" else a for a in args]
    if "-o" not in args:
        args += ["-o", "out.png"]
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(["plot", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("spyre-emu: error: ")
    assert says in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_report_written_by_run_plots(tmp_path, capsys):
    report = tmp_path / "mlp.json"
    assert main(["run", str(ROOT / "examples/programs/mlp_gelu_kernels.json"), "--json", str(report), "--quiet"]) == 0
    for kind in ("gantt", "heatmap", "roofline", "ring"):
        assert main(["plot", str(report), "--kind", kind, "-o", str(tmp_path / f"{kind}.png")]) == 0
        assert (tmp_path / f"{kind}.png").read_bytes().startswith(PNG)
