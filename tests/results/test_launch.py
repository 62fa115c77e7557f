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


def test_a_negative_dispatch_cost_is_refused(tiny_with):
    with pytest.raises(ConfigError, match="launch.dispatch_cycles"):
        tiny_with("launch.dispatch_cycles=-1")
