"""Bad input to `spyre-emu serve`: one stderr line naming the option or file, exit 2, no output file.
Every case is caught before the front end is imported (no torch, no compile)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from spyre_emu.cli import main
from tests.conftest import ROOT

PREFIX = "spyre-emu: error: "


@pytest.mark.parametrize(("extra", "message"), [
    (["--model", "gpt-5"], "--model: unknown model 'gpt-5'; expected one of granite-3.3-8b, llama-3.1-8b"),
    (["--tensor-parallel-size", "9"], "--tensor-parallel-size: a drawer holds at most 8 cards, got 9"),
    (["--max-num-batched-tokens", "100"], "--max-num-batched-tokens: must be a multiple of 64"),
    (["--num-prompts", "0"], "--num-prompts: must be at least 1, got 0"),
    (["--max-concurrency", "0"], "--max-concurrency: must be at least 1, got 0"),
    (["--request-rate", "0"], "--request-rate: must be positive"),
    (["--burstiness", "-1"], "--burstiness: must be positive"),
    (["--random-range-ratio", "1.5"], "--random-range-ratio: must be in [0, 1), got 1.5"),
    (["--metric-percentiles", "99,abc"], "--metric-percentiles: expected comma-separated numbers"),
    (["--goodput", "latency:5"], "--goodput: expected KEY:MS with KEY one of ttft, tpot, e2el"),
    (["--plot-rates", "x.png"], "--plot-rates: needs two or more --request-rate values"),
    (["--dataset-path", "x.json"], "--dataset-path: a --dataset-path needs --dataset-name"),
    (["--dataset-name", "sharegpt", "--dataset-path", "missing.json"], "missing.json: cannot read"),
    (["--set", "dram.size_bytes=-1"], "dram.size_bytes"),
    (["--request-rate"], "argument --request-rate: expected at least one argument"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch, extra, message):
    monkeypatch.chdir(tmp_path)
    args = ["serve", "--model", "granite-3.3-8b", "--json", "out.json", *extra]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(PREFIX)
    assert message in err
    assert err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_without_torch_serve_says_what_it_needs(tmp_path):
    """Everything up to the step prices runs without torch; the prices need the front end."""
    script = ("import sys\nsys.modules['torch'] = None\nfrom spyre_emu.cli import main\n"
              "sys.exit(main(['serve', '--model', 'granite-3.3-8b', '--num-prompts', '2']))\n")
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 2
    assert done.stderr.startswith(PREFIX + "--model: step prices need the torch front end: ")
    assert done.stderr.count("\n") == 1
