"""Bad input to `spyre-emu serve`: one stderr line naming the option or file, exit 2, no output file.
Every case is caught before the front end is imported (no torch, no compile)."""

from __future__ import annotations

import os
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
    # found by the session-40 fuzz harness: tracebacks from numpy or int() once the run had started
    (["--request-rate", "nan"], "--request-rate: must be positive, got nan"),
    (["--request-rate", "1e-300"], "--request-rate: 1e-300 requests/s (burstiness 1) sends requests later than"),
    (["--burstiness", "nan"], "--burstiness: must be positive and finite, got nan"),
    (["--burstiness", "inf"], "--burstiness: must be positive and finite, got inf"),
    (["--seed", "-1"], "--seed: must be at least 0, got -1"),
    (["--random-input-len", "9223372036854775807"], "--random-input-len: must be from 1 to 2^62"),
    (["--goodput", "ttft:nan"], "--goodput: expected KEY:MS"),
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


@pytest.mark.parametrize(("kind", "message"), [
    ("fifo", "cannot read: not a regular file"),  # read_text waited on the FIFO forever
    ("deep", "not JSON: nested too deeply"),  # a RecursionError traceback
])
def test_an_unreadable_dataset_is_one_line(tmp_path, capsys, kind, message):
    """Found by the session-40 fuzz harness."""
    path = tmp_path / "data" / "sharegpt.json"
    path.parent.mkdir()
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("[" * 100000)
    out = tmp_path / "out.json"
    assert main(["serve", "--model", "granite-3.3-8b", "--dataset-name", "sharegpt", "--dataset-path", str(path),
                 "--json", str(out)]) == 2
    assert capsys.readouterr().err == f"{PREFIX}{path}: {message}\n"
    assert not out.exists()


def test_without_torch_serve_says_what_it_needs(tmp_path):
    """Everything up to the step prices runs without torch; the prices need the front end."""
    script = ("import sys\nsys.modules['torch'] = None\nfrom spyre_emu.cli import main\n"
              "sys.exit(main(['serve', '--model', 'granite-3.3-8b', '--num-prompts', '2']))\n")
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 2
    assert done.stderr.startswith(PREFIX + "--model: step prices need the torch front end: ")
    assert done.stderr.count("\n") == 1
