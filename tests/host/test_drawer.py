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
from tests.host.hand import pcie_us
from tests.host.perfetto import problems

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
    host = load_host()
    rt = host.runtime

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
    assert problems(events) == []  # the host model's processes and the card's own (its cores' lanes)
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


def test_the_host_model_alone_is_a_trace_acelyzer_verifies_and_perfetto_reads(tmp_path):
    """The front end's step timeline: two ranks, two launches each of the same program and an all-reduce.
    Each launch's flow leaves its own build (not the program's first) and enters its kernel."""
    ranks = [[Launch("k", 100.0, card=r), Launch("k", 50.0, card=r), Collective("all_reduce", 1 << 20, (0, 1))]
             for r in range(2)]
    path = tmp_path / "t.json"
    path.write_text(trace_json(simulate_ranks(ranks, load_host(), load_machine()), 2, {"k": "t.0.json"}))
    events = json.loads(path.read_text())["traceEvents"]
    assert problems(events) == []
    kernels = [e for e in events if e["ph"] == "X" and e["cat"] == "host" and e["name"] == "k"]
    assert [e["args"]["trace"] for e in kernels] == ["t.0.json"] * 4
    starts = sorted(e["ts"] for e in events if e["ph"] == "s" and e["cat"] == "launch")
    build = load_host().runtime.deserialize_us + load_host().runtime.prepare_us  # a first call builds
    assert starts == pytest.approx([build - 0.001] * 2 + [build + load_host().runtime.patch_us - 0.001] * 2)
    assert_acelyzer_verifies(path, tmp_path)


@pytest.mark.parametrize(("bad", "found"), [
    ({"ph": "X", "pid": 1, "tid": 1, "ts": 5.0, "dur": 10.0}, "overlaps"),        # crosses the 0-10 slice's end
    ({"ph": "s", "id": 9, "cat": "c", "name": "c", "pid": 1, "tid": 1, "ts": 50.0}, "needs one 's' and one 'f'"),
    ({"ph": "f", "bp": "e", "id": 8, "cat": "c", "name": "c", "pid": 1, "tid": 1, "ts": 50.0}, "inside no slice"),
    ({"ph": "M", "name": "thread_name", "pid": 2, "tid": 1, "args": {"name": "x"}, "ts": 0}, "is named"),
    ({"ph": "X", "pid": "p", "tid": 1, "ts": 0.0, "dur": 1.0}, "integers"),
    ({"ph": "Q", "pid": 1, "tid": 1, "ts": 0.0}, "phase"),
])
def test_the_perfetto_rules_catch_what_the_importer_misreads(bad, found):
    """A trace that keeps the rules (a slice nested in another, a flow's start inside one), then one bad
    event more; flow 8 ends in the bad event, or nowhere (then only that is wrong)."""
    good = [{"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "t"}, "ts": 0},
            {"ph": "X", "pid": 1, "tid": 1, "ts": 0.0, "dur": 10.0},
            {"ph": "X", "pid": 1, "tid": 1, "ts": 2.0, "dur": 3.0},
            {"ph": "s", "id": 8, "cat": "c", "name": "c", "pid": 1, "tid": 1, "ts": 1.0}]
    end = {"ph": "f", "bp": "e", "id": 8, "cat": "c", "name": "c", "pid": 1, "tid": 1, "ts": 4.0}
    assert problems(good + [end]) == []
    assert any(found in p for p in problems(good + ([] if bad["ph"] == "f" else [end]) + [bad]))
