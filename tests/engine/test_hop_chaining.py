"""Ring hop chaining is an exact optimization: every log is identical with every hop an event."""

import json

import numpy as np
import pytest

from spyre_emu.engine import layout as L
from spyre_emu.engine import simulate
from spyre_emu.engine.pack import pack
from spyre_emu.pipeline import load_program, parse
from spyre_emu.unit_program import parse_unit_program
from spyre_emu.validation.workloads import matmul_program
from tests.conftest import ROOT, program

MB = 1 << 20


def _same(a, b):
    for field in ("start", "end", "first_push", "order", "unit_stats", "channel_stats", "link_stats"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


@pytest.mark.parametrize("name", ["stream_read_64mb", "gemm_1024_32core", "ring_move_128k", "dram_roundtrip_128k"])
def test_examples(spyre, name):
    prog = load_program(ROOT / "examples" / "programs" / f"{name}.json", spyre)
    _same(simulate(prog, spyre), simulate(prog, spyre, chain_hops=False))


def _mixed_traffic(cores: int, kb: int) -> dict:
    """Loads, stores and sends criss-crossing the ring, every core injecting and receiving."""
    units = {}
    for c in range(cores):
        units[c] = {
            "load": [{"op": "load", "dram": f"x+{c * kb * 1024}", "lx": 0, "bytes": kb * 1024}],
            "store": [{"op": "store", "lx": 0, "dram": f"y+{c * kb * 1024}", "bytes": kb * 1024}],
            "send": [{"op": "send", "lx": 0, "to_core": (c * 7 + 3) % cores, "to_lx": MB, "bytes": kb * 512}],
        }
        if units[c]["send"][0]["to_core"] == c:
            del units[c]["send"]
    host = [{"op": "h2d", "dram": "x", "bytes": kb * 1024}, {"op": "d2h", "dram": "y", "bytes": kb * 1024}]
    return program(units, {"x": {"bytes": cores * kb * 1024}, "y": {"bytes": cores * kb * 1024}}, host=host)


@pytest.mark.parametrize(("cores", "kb"), [(32, 64), (13, 200), (4, 8)])
def test_mixed_traffic(spyre, cores, kb):
    prog = parse_unit_program(json.loads(json.dumps(_mixed_traffic(cores, kb))), spyre)
    _same(simulate(prog, spyre), simulate(prog, spyre, chain_hops=False))


def test_tiny_card(tiny):
    prog = parse_unit_program(_mixed_traffic(4, 16), tiny)
    _same(simulate(prog, tiny), simulate(prog, tiny, chain_hops=False))


def _waiting_injectors(cores: int, kb: int) -> dict:
    """Multicast and plain loads crossing stops whose store and send units wait on the loads' tokens,
    then strided stores (a set-up per piece) and sends while the loads' copies still pass."""
    units = {}
    for c in range(cores):
        to = [(c + j * 5) % cores for j in range(4)]
        units[c] = {
            "load": [{"op": "load", "dram": f"x+{c * kb * 1024}", "lx": 0, "bytes": kb * 512, "to": to,
                      "signal": ["half", "sent"]},
                     {"op": "load", "dram": f"x+{c * kb * 1024 + kb * 512}", "lx": kb * 1024, "bytes": kb * 512}],
            "store": [{"op": "store", "lx": 0, "dram": f"y+{c * kb * 1024}", "bytes": kb * 512, "piece": 512,
                       "stride": 1024, "wait": ["half"]}],
            "send": [{"op": "send", "lx": 0, "to_core": (c + 3) % cores, "to_lx": 2 * kb * 1024, "bytes": kb * 256,
                      "wait": ["sent"]}],
        }
    return program(units, {"x": {"bytes": cores * kb * 1024}, "y": {"bytes": cores * kb * 1024}})


@pytest.mark.parametrize(("cores", "kb"), [(32, 16), (9, 24)])
def test_chaining_past_waiting_and_setting_up_injectors(spyre, cores, kb):
    """A copy crosses a stop whose store or send unit is between instructions or setting up a piece
    (ring._unit_horizon_nb): the same logs as with every hop an event."""
    prog = parse_unit_program(json.loads(json.dumps(_waiting_injectors(cores, kb))), spyre)
    _same(simulate(prog, spyre), simulate(prog, spyre, chain_hops=False))


@pytest.mark.parametrize(("shape", "split"), [((1, 64, 1024, 512), (1, 32, 1, 1)), ((1, 128, 512, 1024), (1, 4, 2, 4))])
def test_lowered_matmul_with_cohorts(spyre, shape, split):
    """A lowered matmul: multicast cohorts, split K's reduction, stores waiting on the PT."""
    units = parse(matmul_program(*shape, split), spyre, "calibration").units
    _same(simulate(units, spyre), simulate(units, spyre, chain_hops=False))


def _some_stores(cores: int, kb: int) -> dict:
    """Every core loads; every third also stores once its load is done (its stop may inject while other
    cores' sticks pass), the others have no store or send instruction at all (their stops are quiet)."""
    units = {}
    for c in range(cores):
        units[c] = {"load": [{"op": "load", "dram": f"x+{c * kb * 1024}", "lx": 0, "bytes": kb * 1024,
                              "signal": ["in"] if c % 3 == 0 else []}]}
        if c % 3 == 0:
            units[c]["store"] = [{"op": "store", "lx": 0, "dram": f"y+{c * kb * 1024}", "bytes": kb * 1024,
                                  "wait": ["in"]}]
    return program(units, {"x": {"bytes": cores * kb * 1024}, "y": {"bytes": cores * kb * 1024}})


@pytest.mark.parametrize(("cores", "kb"), [(32, 32), (10, 48)])
def test_quiet_stops(spyre, cores, kb):
    """pack marks quiet the core stops whose store and send units have no instruction (the hop chain then
    reads no unit there), only those; the logs equal those with every hop an event."""
    prog = parse_unit_program(json.loads(json.dumps(_some_stores(cores, kb))), spyre)
    kinds = pack(prog, spyre, 1 << 62).state[L.ST_STOPS][:, L.R_KIND]
    for c in range(spyre.cores.count):
        stop = spyre.stop_of(f"core{c}")
        assert kinds[stop] == (L.STOP_UNITS if c < cores and c % 3 == 0 else L.STOP_QUIET), c
    assert kinds[spyre.stop_of("pcie")] == L.STOP_QUIET
    assert (kinds[[spyre.stop_of(f"mc{m}") for m in range(4)]] == L.STOP_MEMORY).all()
    _same(simulate(prog, spyre), simulate(prog, spyre, chain_hops=False))
