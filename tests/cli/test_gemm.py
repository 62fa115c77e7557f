"""`spyre-emu gemm`: one GEMM as a program; a plain card gives SCALE-Sim's Total Cycles."""

import json

import pytest

from spyre_emu.cli import main
from spyre_emu.config import load_machine
from spyre_emu.gemm import kernel_program
from spyre_emu.kernel_program import parse_kernel_program
from spyre_emu.lowering import lower
from spyre_emu.pipeline import run
from tests.conftest import ROOT

PLAIN = str(ROOT / "configs" / "plain-systolic.toml")


def _gemm(tmp_path, capsys, *args):
    out = tmp_path / "report.json"
    code = main(["gemm", *args, "--json", str(out), "--quiet"])
    captured = capsys.readouterr()
    return code, captured.err, json.loads(out.read_text()) if out.exists() else None


def test_plain_card_takes_scalesim_total_cycles(tmp_path, capsys):
    """os, 8 x 8: ceil(37/8) * ceil(23/8) = 15 folds of 51 + 8 + 8 - 2 = 65 cycles, minus 1."""
    code, err, report = _gemm(tmp_path, capsys, "--m", "37", "--n", "23", "--k", "51", "--config", PLAIN,
                              "--set", "pt.pe_rows=8", "--set", "pt.pe_cols=8", "--set", "pt.dataflow=os")
    assert (code, err) == (0, "")
    assert report["total_cycles"] == 15 * 65 - 1
    assert report["systolic"]["folds"] == 15


def test_spyre_card_runs_the_kernel_program(tmp_path, capsys):
    """4 cores: (mb, out) = (1, 4) loads 64 + 64 rows and columns per K, (2, 2) 32 + 128, (4, 1) 16 + 256."""
    code, err, report = _gemm(tmp_path, capsys, "--m", "64", "--n", "256", "--k", "128", "--cores", "4")
    assert (code, err) == (0, "")
    assert report["gemm"]["work_division"] == {"mb": 1, "out": 4}
    spyre = load_machine()
    units = lower(parse_kernel_program(kernel_program(64, 256, 128, "fp16", {"mb": 1, "out": 4})), spyre)
    assert report["total_cycles"] == run(units, spyre).report.total_cycles
    assert report["pt"]["macs"] == 64 * 256 * 128


@pytest.mark.parametrize(("args", "message"), [
    (["--m", "0", "--n", "8", "--k", "8"], "--m: must be at least 1"),
    (["--m", "8", "--n", "8", "--k", "8", "--dtype", "int4"], "--dtype: unknown or unsupported dtype 'int4'"),
    (["--m", "8", "--n", "8", "--k", "8", "--cores", "33"], "--cores: must be between 1 and the card's 32 cores"),
    (["--m", "3", "--n", "100", "--k", "8", "--cores", "7"], "--cores: 7 cores cannot split M = 3 rows"),
    (["--m", "8", "--n", "8", "--k", "8", "--cores", "2", "--config", PLAIN], "--cores: a plain array runs"),
    (["--m", "8", "--n", "8", "--k", "8", "--max-cycles", "0"], "--max-cycles: must be a number of cycles"),
    (["--m", "x", "--n", "8", "--k", "8"], "argument --m: invalid int value: 'x'"),
])
def test_bad_gemm_is_one_line(tmp_path, capsys, args, message):
    code, err, report = _gemm(tmp_path, capsys, *args)
    assert code == 2
    assert report is None
    assert len(err.splitlines()) == 1
    assert message in err
