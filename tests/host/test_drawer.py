"""``spyre-emu run --cards N``: one program on N cards, a rank each, its outputs all-reduced; the report's
drawer figures by hand, and the timeline's host, drawer and card processes (acelyzer -V still passes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from spyre_emu.cli import main
from spyre_emu.config import load_machine
from spyre_emu.host import Collective, Launch, collective_us, load_host, simulate_ranks
from spyre_emu.host.drawer import trace_json
from tests.conftest import assert_acelyzer_verifies

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = ROOT / "examples" / "programs" / "mlp_gelu_kernels.json"


def test_a_kernel_program_on_four_cards(tmp_path, capsys):
    """Each rank builds its launch (751.5 + 4,205 µs, a first call), its card runs the program (its
    simulated time starts with the card's dispatch); 5 µs later the host knows, and the cards all-reduce
    the 1 MiB output."""
    trace, report = tmp_path / "run.json", tmp_path / "report.json"
    assert main(["run", str(PROGRAM), "--cards", "4", "--trace", str(trace), "--json", str(report)]) == 0
    data = json.loads(report.read_text())
    drawer, card_us = data["drawer"], data["latency_us"]
    host, machine = load_host(), load_machine()
    rt = host.runtime

    def pcie_us(n):
        p = machine.pcie
        return p.latency_cycles / machine.clock.ghz / 1000 + n * 536 / 512 / (p.gbytes_per_s * 1000)
    reduce = collective_us("all_reduce", 1 << 20, 4, host.drawer, pcie_us)
    assert drawer["all_reduce_bytes"] == 1 << 20
    assert drawer["collective_us"] == pytest.approx(reduce, abs=1e-3)
    want = rt.deserialize_us + rt.prepare_us + card_us + rt.completion_us + reduce
    assert drawer["host_us"] == pytest.approx(want, abs=1e-2)
    assert drawer["card_busy_us"] == [pytest.approx(card_us, abs=1e-3)] * 4
    assert "drawer: 4 cards" in capsys.readouterr().out
    events = json.loads(trace.read_text())["traceEvents"]
    names = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert {"host (runtime model)", "drawer", "card 0", "card 3"} <= names
    flows = [e for e in events if e["ph"] in "sf"]
    assert sum(e["cat"] == "launch" for e in flows) == 2 * 4
    assert sum(e["cat"] == "collective" for e in flows) == 2 * 4
    assert_acelyzer_verifies(trace, tmp_path)


def test_one_card_has_no_collective(tmp_path):
    report = tmp_path / "report.json"
    assert main(["run", str(PROGRAM), "--cards", "1", "--json", str(report), "--quiet"]) == 0
    drawer = json.loads(report.read_text())["drawer"]
    assert (drawer["all_reduce_bytes"], drawer["collective_us"]) == (0, 0)


def test_too_many_cards_is_one_line(tmp_path, capsys):
    assert main(["run", str(PROGRAM), "--cards", "9", "--json", str(tmp_path / "r.json")]) == 2
    assert capsys.readouterr().err.strip() == "spyre-emu: error: --cards: a drawer holds 1 to 8 cards, got 9"
    assert not (tmp_path / "r.json").exists()


def test_the_host_model_alone_is_a_trace_acelyzer_verifies(tmp_path):
    """The front end's <trace>.drawer.json: two ranks, a launch each and an all-reduce."""
    ranks = [[Launch("k", 100.0, card=r), Collective("all_reduce", 1 << 20, (0, 1))] for r in range(2)]
    path = tmp_path / "t.drawer.json"
    path.write_text(trace_json(simulate_ranks(ranks, load_host(), load_machine()), 2))
    assert_acelyzer_verifies(path, tmp_path)
