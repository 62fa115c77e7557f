"""`spyre-emu sweep SPEC.toml`: the example specs run; bad specs are one line naming file and key, exit 2."""

from __future__ import annotations

import pytest

from spyre_emu.cli import main
from spyre_emu.sweep import load_spec
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "sweeps"


@pytest.mark.parametrize("spec", sorted(EXAMPLES.glob("*.toml")), ids=lambda p: p.stem)
def test_example_specs_load(spec):
    loaded = load_spec(spec)
    assert loaded.space


def test_the_cli_writes_the_table(tmp_path, capsys):
    spec = tmp_path / "s.toml"
    spec.write_text('[fixed]\nM = 64\nN = 256\nK = 256\n[space]\nsplit_m = {grid_search = [1, 2]}\n'
                    '[space.dram]\ninterleave_bytes = {choice = [512]}\n[sweep]\nworkers = 1\n')
    out = tmp_path / "t.csv"
    assert main(["sweep", str(spec), "--output", str(out), "--no-cache"]) == 0
    captured = capsys.readouterr()
    lines = out.read_text().splitlines()
    assert lines[0].startswith("M,N,K,split_m,dram.interleave_bytes,latency_us")
    assert len(lines) == 3
    assert "split_m" in captured.out
    assert "2 points (0 from the cache)" in captured.err


@pytest.mark.parametrize(("text", "message"), [
    ("[space]\nsplit_m = {grid_search = []}\n", "space.split_m: grid_search has no values"),
    ("[space]\nsplit_m = 1\n[sweep]\nseed = 'x'\n", "sweep.seed: expected int, got 'x'"),
    ("[space]\nsplit_m = 1\n[sweep]\nspeed = 1\n", "sweep.speed: unknown option"),
    ("[spaces]\n", "spaces: unknown table"),
    ("[task]\n", "space: the space is empty"),
    ("[task]\nkind = 'serve'\n[space]\nx = 1\n", "task.kind: unknown task kind 'serve'"),
    ("[task]\nkind = 'program'\n[space]\nx = 1\n", "task: a program task needs program"),
    ("[fixed]\nM = 64\nN = 64\nK = 64\n[space]\ndram.channels = {grid_search = [true]}\n",
     "space.dram.channels: expected"),
    ("[space\n", "invalid TOML"),
    ("[space]\nx = " + "[" * 5000 + "]" * 5000 + "\n", "invalid TOML: nested too deeply"),  # was RecursionError
    ("[space]\nx = " + "9" * 5000 + "\n", "invalid TOML: Exceeds the limit (4300 digits)"),  # was ValueError
    ("[space]\nsplit_m = 1\n[sweep]\nworkers = 0\n", "sweep.workers: must be at least 1, got 0"),  # as --workers
])
def test_bad_specs_are_one_line_errors(tmp_path, capsys, text, message):
    spec = tmp_path / "bad.toml"
    spec.write_text(text)
    out = tmp_path / "t.csv"
    assert main(["sweep", str(spec), "--output", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"spyre-emu: error: {spec}: {message}"), err
    assert err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize(("args", "message"), [
    (["--workers", "0"], "--workers: must be at least 1"),
    (["--output", "t.xlsx"], "--output: unknown output type '.xlsx'"),
])
def test_bad_options_are_one_line_errors(tmp_path, capsys, args, message):
    assert main(["sweep", str(EXAMPLES / "qo_decode_splits.toml"), *args]) == 2
    assert capsys.readouterr().err == f"spyre-emu: error: {message}; expected one of .csv, .json, .parquet\n" \
        if "output" in message else f"spyre-emu: error: {message}\n"
