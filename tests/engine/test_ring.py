"""Ring timing, derived by hand on configs/tiny.toml (hop latency H = 2, one stick per link cycle).

A send's sticks leave the LX port one per cycle from its start; each hop takes H cycles;
the receiving core's ring port writes one stick per cycle; the send ends the cycle after
its last write.
"""

H = 2


def _send(to_core, nbytes, lx=0):
    return {"op": "send", "lx": lx, "to_core": to_core, "to_lx": 0, "bytes": nbytes}


def test_one_stick_one_hop(tiny, run_units):
    log = run_units(tiny, {0: {"send": [_send(1, 128)]}})
    assert log.total_cycles == H + 1  # leave at 0, arrive at H, written at H, done H + 1


def test_one_stick_three_hops(tiny, run_units):
    # core0 -> core3: 3 hops either way on the 6-stop ring; the tie goes clockwise.
    log = run_units(tiny, {0: {"send": [_send(3, 128)]}})
    assert log.total_cycles == 3 * H + 1
    assert log.link_stats[[0, 2, 4], 0].tolist() == [1, 1, 1]  # core0->1, 1->2, 2->3 clockwise


def test_train_of_sticks_pipelines(tiny, run_units):
    log = run_units(tiny, {0: {"send": [_send(1, 8 * 128)]}})
    assert log.total_cycles == H + 8  # last stick leaves at 7, lands at 7 + H, done one later


def test_two_flows_contend_for_one_link(tiny, run_units):
    """core0 -> core2 (flow A) and core1 -> core2 (flow B), 4 sticks each, both from cycle 0.

    Link core1->core2 serves sticks first come, first served; sticks reaching it in the same
    cycle go in the queue's canonical order, lower unit first (core0.send is unit 2, core1.send
    unit 13), so A wins ties. Departures on it: B0 0, B1 1, A0 2 (arrived 2, beats B2),
    B2 3, A1 4 (arrived 3, beats B3), B3 5, A2 6, A3 7: eight sticks back to back. Arrivals
    at core2 are departures + H, each written on arrival; done one cycle after the last:
    B 5 + H + 1 = 8, A 7 + H + 1 = 10. Waits on the link: B2 1, A1 1, B3 2, A2 2, A3 2 = 8.
    """
    log = run_units(tiny, {0: {"send": [_send(2, 4 * 128)]}, 1: {"send": [_send(2, 4 * 128)]}})
    ends = {ins.core: int(e) for ins, e in zip(log.instructions, log.end, strict=True)}
    assert ends == {0: 10, 1: 8}
    link_core1_cw = 2 * 1
    assert log.link_stats[link_core1_cw].tolist() == [8, 8]


def test_a_send_stick_holds_each_link_longer(tiny_with, run_units):
    """With send_stick_cycles 4 a send stick holds a link 4 cycles: the sticks leave at 0, 4, 8, 12; the
    last lands at 12 + H and is written: done 12 + H + 1. Over two hops the second link is held
    the same way, in step: done 12 + 2H + 1. A load's sticks still hold a link one cycle."""
    machine = tiny_with("ring.send_stick_cycles=4")
    assert run_units(machine, {0: {"send": [_send(1, 4 * 128)]}}).total_cycles == 12 + H + 1
    assert run_units(machine, {0: {"send": [_send(2, 4 * 128)]}}).total_cycles == 12 + 2 * H + 1
    load = {"op": "load", "dram": 0, "lx": 0, "bytes": 4 * 128}
    plain = run_units(tiny_with(), {1: {"load": [load]}})
    assert run_units(machine, {1: {"load": [load]}}).end.tolist() == plain.end.tolist()
