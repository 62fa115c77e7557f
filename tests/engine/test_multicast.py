"""Multicast loads, derived by hand on configs/tiny.toml.

tiny: stops core0 0, core1 1, core2 2, core3 3, mc0 4, pcie 5; hop latency H = 2. A one-stick
read of address 0 from core0: the request reaches mc0 after 2 hops (cycle 4), ACT at 4, column
at 14, data 19..23, so the stick leaves the controller at 23. From mc0, core0 is 2 hops
clockwise (through pcie), core1 3 (a tie, so clockwise), core3 1 and core2 2 counter-clockwise.
Each destination's ring receive port writes the copy on arrival; the load ends one cycle after
its last write.
"""

import numpy as np

from spyre_emu.unit_program import parse_unit_program
from tests.conftest import program
from tests.reference.test_differential import assert_agree

LEAVE = 23  # the stick leaves mc0
H = 2


def _load(to=None, nbytes=128, dram=0):
    return {"op": "load", "dram": dram, "lx": 0, "bytes": nbytes, **({"to": to} if to is not None else {})}


def test_one_copy_each_way(tiny, run_units):
    # Clockwise copy: core0 at 23 + 2H = 27, done 28. Counter-clockwise copy: core3 at 23 + H.
    log = run_units(tiny, {0: {"load": [_load([0, 3])]}})
    assert log.total_cycles == LEAVE + 2 * H + 1
    assert log.link_stats[[2 * 4, 2 * 5, 2 * 4 + 1], 0].tolist() == [1, 1, 1]  # mc0->pcie, pcie->core0; mc0->core3
    assert int(log.channel_stats[:, 0].sum()) == 1  # one DRAM read for two cores


def test_one_copy_passes_every_destination_on_its_way(tiny, run_units):
    # One clockwise copy bound for core1 (3 hops), written at core0 on the way (27): core1 at 29, done 30.
    log = run_units(tiny, {0: {"load": [_load([1, 0])]}})
    assert log.total_cycles == LEAVE + 3 * H + 1
    assert int(log.link_stats[:, 0].sum()) == 3
    assert int(log.link_stats[2 * 0, 0]) == 1  # core0 -> core1


def test_multicast_to_own_core_times_as_a_load(tiny, run_units):
    plain = run_units(tiny, {2: {"load": [_load(None, 40 * 128)]}})
    to_self = run_units(tiny, {2: {"load": [_load([2], 40 * 128)]}})
    assert to_self.end.tolist() == plain.end.tolist()
    assert np.array_equal(to_self.link_stats, plain.link_stats)


def test_sharing_one_read_beats_two_reads(tiny, run_units):
    """Two cores' worth of data from one read moves half the DRAM sticks of two private loads."""
    nbytes = 96 * 128
    shared = run_units(tiny, {0: {"load": [_load([0, 1], nbytes)]}})
    private = run_units(tiny, {0: {"load": [_load(None, nbytes)]}, 1: {"load": [_load(None, nbytes)]}})
    assert int(shared.channel_stats[:, 0].sum()) == 96
    assert int(private.channel_stats[:, 0].sum()) == 192
    assert shared.total_cycles < private.total_cycles


def test_reference_agrees_on_crossing_multicasts(tiny):
    """Two multicasts whose copies share links, and a plain load beside them: engine = simpy reference."""
    cores = {0: {"load": [_load([1, 2, 3], 70 * 128)]}, 3: {"load": [_load([0, 1], 50 * 128, 4096)]},
             1: {"load": [_load(None, 30 * 128, 8192)]}}
    assert_agree(parse_unit_program(program(cores), tiny), tiny)
