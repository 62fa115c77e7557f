"""A DRAM channel serves reads ahead of their pick cycles when nothing before the pick can change it
(dma.channel_nb, dma.write_horizon_nb): an exact optimization, every log as with every pick an event."""

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from spyre_emu.config import load_machine
from spyre_emu.engine import simulate
from spyre_emu.pipeline import load_program
from spyre_emu.unit_program import parse_unit_program
from tests.conftest import ROOT
from tests.engine.test_hop_chaining import _mixed_traffic, _waiting_injectors
from tests.reference.programs import unit_programs


def _same(a, b):
    for field in ("start", "end", "first_push", "order", "unit_stats", "channel_stats", "link_stats"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)


@pytest.mark.parametrize("ahead", [True, False])
def test_a_write_starting_after_a_pick_is_served_before_the_later_reads(tiny_with, run_units, ahead):
    """One channel, piece setup 30. core3's load of 2,048 B issues eight 2-stick reads at 30 (after its set-up),
    all reaching mc0 at 32 (one hop); its relu of 29 sticks ends at 4 + 29 = 33 and starts the store, whose
    one stick (to 4096: bank 0, row 2) is issued at 63 and joins the write queue at 65.
    Reads at 32: the first opens bank 0 (ACT 32, column 42, data 47..55); the next three hit, picked at 42,
    50 and 58 (the column commands), data to 79. Seen at 32, no write can join before 32 + 30 + 2 = 64, so
    those three are served within the pick at 32; the next pick, at 66, is an event, and takes the waiting
    write: PRE 66, ACT 73, column 83, data 86..90 (after the read's bus end 79 + tRTW), the store's end.
    Then the reads of bank 1: picked at 83 (ACT 83, column 93, data 90 + tWTR + tRL = 99..107), 94, 102 and
    110, data to 131; the last stick leaves at 131, reaches core3 at 133, written at 134, the load's end.
    (Served ahead past 64, the read of 1,024 would be picked at 66 and the write after it.)"""
    machine = tiny_with("dram.channels=1", "dma.piece_setup_cycles=30")
    cores = {3: {"load": [{"op": "load", "dram": 0, "lx": 0, "bytes": 2048}],
                 "sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 29, "signal": ["go"]}],
                 "store": [{"op": "store", "lx": 0, "dram": 4096, "bytes": 128, "wait": ["go"]}]}}
    log = run_units(machine, cores, serve_ahead=ahead)
    names = [ins.op for ins in log.instructions]
    assert dict(zip(names, log.end.tolist(), strict=True)) == {"load": 134, "store": 90, "relu": 33}


@pytest.mark.parametrize("ahead", [True, False])
def test_a_read_issued_after_the_pick_that_arrives_first_is_picked_first(tiny_with, run_units, ahead):
    """One channel, piece setup 3. core3 reads 0 (A) at 3, arriving at 5 (one hop), then 256 (C), set up from 3,
    issued at 6, arriving at 8; core1 reads 512 (B) at 3, arriving at 9 (three hops). At 5 A is picked: ACT 5,
    column 15, data 20..24, back at 26, done 27. B, then the queue's head, arrives after 5 + one hop, so a
    read issued later may still come first: the next pick is an event, at 15, and takes C (arrived at 8): a
    row hit, data 24..28, done 31; then B, picked at 19 (C's column command), data 28..32, back at core1 at
    38, done 39. (B served ahead at 15: B done 35, C done 35.)"""
    machine = tiny_with("dram.channels=1", "dma.piece_setup_cycles=3")
    cores = {3: {"load": [{"op": "load", "dram": a, "lx": 0, "bytes": 128} for a in (0, 256)]},
             1: {"load": [{"op": "load", "dram": 512, "lx": 0, "bytes": 128}]}}
    log = run_units(machine, cores, serve_ahead=ahead)
    assert log.end.tolist() == [39, 27, 31]


@pytest.mark.parametrize("ahead", [True, False])
def test_a_nearer_read_issued_after_the_pick_that_ties_with_the_head_goes_first(tiny_with, run_units, ahead):
    """One channel, piece setup 4. core1 reads 0 (A) at 4, arriving at 10 (three hops); the host's d2h of 4096 (H)
    is issued at its PCIe latency, 10, arriving at 12; core3's relu of 2 sticks ends at 6 and starts its read of
    2048 (C), set up until 10, arriving at 12 too. A is picked at 10: ACT 10, column 20, data 25..29, back at
    core1 at 35, done 36. H, the head then, arrives at 10 + one hop, not before it, so the next pick is an
    event: at 20, where C (core3's load, a lower unit than the host's) comes first: bank 1, ACT 20, column 30,
    data 35..39, done 42. H at 30 (C's column command), conflicting with A's row: PRE 30, ACT 37, column 47,
    data 52..56, at the PCIe stop at 58, done 59. (H served ahead at 20: C done 69.)"""
    machine = tiny_with("dram.channels=1", "dma.piece_setup_cycles=4")
    cores = {1: {"load": [{"op": "load", "dram": 0, "lx": 0, "bytes": 128}]},
             3: {"sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 2, "signal": ["go"]}],
                 "load": [{"op": "load", "dram": 2048, "lx": 0, "bytes": 128, "wait": ["go"]}]}}
    log = run_units(machine, cores, host=[{"op": "d2h", "dram": 4096, "bytes": 128}], serve_ahead=ahead)
    assert log.end.tolist() == [36, 42, 6, 59]


@pytest.mark.parametrize("ahead", [True, False])
def test_a_write_joining_at_the_first_pick_past_the_horizon(tiny_with, run_units, ahead):
    """The first test with tRCD 9: reads picked at 32 (data 46..54), 41, 49 and 57 (data to 78), all within the
    pick at 32 (before 64); the next pick is at 65, the cycle the store's write joins (its stick, issued at 63,
    reaches mc0 at 65, an event before the pick): the write, PRE 65, ACT 72, column 81, data 84..88, the store's
    end. The reads of bank 1: picked at 81 (data 88 + tWTR + tRL = 97..105), the store still under way, so at 92 as an
    event; the store ended at 88, so the picks of 100 and 108 are made within it: data to 129, the load done at 132.
    (With the horizon two cycles later the pick at 65 is a read: the store ends at 97.)"""
    machine = tiny_with("dram.channels=1", "dma.piece_setup_cycles=30", "dram.t_rcd_cycles=9")
    cores = {3: {"load": [{"op": "load", "dram": 0, "lx": 0, "bytes": 2048}],
                 "sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 29, "signal": ["go"]}],
                 "store": [{"op": "store", "lx": 0, "dram": 4096, "bytes": 128, "wait": ["go"]}]}}
    log = run_units(machine, cores, serve_ahead=ahead)
    assert log.end.tolist() == [132, 88, 33]


def test_no_pick_ahead_while_a_host_write_is_left(tiny_with, run_units):
    """One channel, one-cycle hops. core3 reads 8 KB: 32 two-stick reads, all reaching mc0 at 1; its relu of 20
    sticks ends at 24 and starts the host's h2d of one stick, issued at its PCIe latency, 34, reaching mc0 at 35.
    Reads are picked at 1 (ACT 1, column 11, data 16..24), 11, 19 and 27 (data to 48); the pick at 35 takes the
    write: bank 0 holds row 0, so PRE 35, ACT 42, column 52, data 55..59, the h2d's end. Served ahead (the host's
    write not counted), the reads queued before it all go first and the h2d ends at 339."""
    machine = tiny_with("dram.channels=1", "ring.hop_latency_cycles=1")
    cores = {3: {"load": [{"op": "load", "dram": 0, "lx": 0, "bytes": 8192}],
                 "sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 20, "signal": ["h"]}]}}
    host = [{"op": "h2d", "dram": 4096, "bytes": 128, "wait": ["h"]}]
    log = run_units(machine, cores, host=host)
    assert log.end.tolist()[1:] == [24, 59]
    _same(log, run_units(machine, cores, host=host, serve_ahead=False))


def test_no_pick_ahead_while_a_store_is_under_way(tiny_with, run_units):
    """One channel, piece setup 30. core0's store of one stick starts at 0, is issued at 30 and joins the write
    queue at 34 (two hops); core3's eight reads reach mc0 at 32. The first is picked at 32 (ACT 32, column 42,
    data 47..55); the store under way allows no pick ahead, so the next pick, at 42, is an event and takes the
    write: PRE 52 (ACT 32 + tRAS), ACT 59, column 69, data 72..76, the store's end. (Served ahead as if no store
    had started, the reads of 42, 50 and 58 go first: the store ends at 90.)"""
    machine = tiny_with("dram.channels=1", "dma.piece_setup_cycles=30")
    cores = {0: {"store": [{"op": "store", "lx": 0, "dram": 4096, "bytes": 128}]},
             3: {"load": [{"op": "load", "dram": 0, "lx": 0, "bytes": 2048}]}}
    log = run_units(machine, cores)
    assert log.end.tolist()[0] == 76
    _same(log, run_units(machine, cores, serve_ahead=False))


@pytest.mark.parametrize("name", ["stream_read_64mb", "gemm_1024_32core", "dram_roundtrip_128k",
                                  "mlp_gelu_kernels"])
def test_examples(spyre, name):
    prog = load_program(ROOT / "examples" / "programs" / f"{name}.json", spyre)
    _same(simulate(prog, spyre), simulate(prog, spyre, serve_ahead=False))


@pytest.mark.parametrize("make", [_mixed_traffic, _waiting_injectors])
def test_loads_beside_stores_sends_and_the_host(spyre, make):
    prog = parse_unit_program(json.loads(json.dumps(make(13, 24))), spyre)
    _same(simulate(prog, spyre), simulate(prog, spyre, serve_ahead=False))


@pytest.mark.parametrize("overrides", [[], ["dma.max_burst_bytes=256", "dma.max_inflight_bytes=512",
                                            "dma.piece_setup_cycles=7", "dram.t_refi_cycles=500"]])
def test_random_programs(overrides):
    """The random programs of the reference tests, on the tiny card and a variant with a piece set-up."""
    machine = load_machine(ROOT / "configs" / "tiny.toml", overrides)

    @settings(max_examples=25, deadline=None, database=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(unit_programs(machine))
    def check(data: dict) -> None:
        prog = parse_unit_program(data, machine)
        _same(simulate(prog, machine), simulate(prog, machine, serve_ahead=False))

    check()
