"""The launch: a fixed cost before a kernel program's first instruction, in the report's total."""

from __future__ import annotations

import pytest

from spyre_emu.errors import ConfigError
from spyre_emu.results import build_report

LOAD = {"op": "load", "dram": "x", "lx": 0, "bytes": 128}


def test_the_launch_adds_its_cycles_to_the_total_only(tiny_with, run_units):
    """One 128 B load: 28 card cycles on the tiny card (tests/engine/test_dram.py, row miss), launch 100."""
    machine = tiny_with("launch.dispatch_cycles=100")
    log = run_units(machine, {0: {"load": [LOAD]}}, buffers={"x": {"bytes": 128}})
    data = build_report(log, machine, "p.json").data
    assert log.total_cycles == data["card_cycles"] == 28  # the card's own timeline does not move
    assert data["launch_cycles"] == 100
    assert data["total_cycles"] == 128
    assert data["latency_us"] == round(128 / machine.clock.ghz / 1000, 6)
    assert data["kernels"][0]["start_cycle"] == 0
    assert data["kernels"][0]["end_cycle"] == 28


SEND = {"op": "send", "lx": 0, "to_core": 1, "to_lx": 0, "bytes": 128}


def test_a_relayout_also_pays_its_setup(tiny_with, run_units):
    """A program of LX-to-LX sends alone: one stick one hop is H + 1 = 3 card cycles on the tiny card
    (tests/engine/test_ring.py); its launch is the dispatch 100 and the relayout setup 1,000."""
    machine = tiny_with("launch.dispatch_cycles=100", "launch.relayout_setup_cycles=1000")
    log = run_units(machine, {0: {"send": [SEND]}})
    data = build_report(log, machine, "p.json").data
    assert (data["card_cycles"], data["launch_cycles"], data["total_cycles"]) == (3, 1100, 1103)


def test_sends_beside_other_work_pay_the_dispatch_alone(tiny_with, run_units):
    """A send in a program that also loads (as split K's sends sit in a matmul) is no relayout:
    the load's 28 cycles (above) and the send's 3 overlap on different cores, launch 100."""
    machine = tiny_with("launch.dispatch_cycles=100", "launch.relayout_setup_cycles=1000")
    log = run_units(machine, {0: {"load": [LOAD]}, 2: {"send": [SEND | {"to_core": 3}]}},
                    buffers={"x": {"bytes": 128}})
    data = build_report(log, machine, "p.json").data
    assert (data["card_cycles"], data["launch_cycles"], data["total_cycles"]) == (28, 100, 128)


@pytest.mark.parametrize("key", ["dispatch_cycles", "relayout_setup_cycles"])
def test_a_negative_launch_cost_is_refused(tiny_with, key):
    with pytest.raises(ConfigError, match=f"launch.{key}"):
        tiny_with(f"launch.{key}=-1")
