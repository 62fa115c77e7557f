"""The host runtime: launch phases, graph caching, the compute queue, streams, events, collectives.
Every expected time is derived by hand from configs/host.toml and the card's PCIe figures."""

from __future__ import annotations

import random

import pytest

from spyre_emu.errors import ConfigError
from spyre_emu.host import Collective, Copy, Launch, Record, Wait, collective_us, load_host, plan, simulate_host
from tests.host.hand import BUILD, DRAWER, HOST, MACHINE, RT, pcie_us


def test_one_launch_is_build_compute_completion():
    t = simulate_host([Launch("k", 100.0)], HOST, MACHINE)
    assert t.end_us == pytest.approx(BUILD + 100.0 + RT.completion_us)
    assert t.busy_us("host") == pytest.approx(BUILD)
    assert t.busy_us("card0.compute") == pytest.approx(100.0)


def test_a_cached_graph_is_built_once_and_its_next_launch_only_patched():
    ops = [Launch("k", 1000.0), Launch("k", 1000.0)]
    cached = simulate_host(ops, HOST, MACHINE, cached_launches=True)
    # the second build (patch, 20 µs) overlaps the first kernel; the second kernel follows the first on
    # the card at once (the completion notice is the host's, not the card's)
    assert cached.end_us == pytest.approx(BUILD + 2 * (1000.0) + RT.completion_us)
    rebuilt = simulate_host(ops, HOST, MACHINE, cached_launches=False)
    # the graph path: the first launch deserializes and prepares, and returns once its kernel is done and
    # the host has heard so; only then does the second build its graph again (graph_us) and run
    assert rebuilt.end_us == pytest.approx(BUILD + RT.graph_us + 2 * (1000.0 + RT.completion_us))
    builds = [s.start for s in rebuilt.spans if s.where == "host"]
    assert builds == pytest.approx([0.0, BUILD + 1000.0 + RT.completion_us])


def test_a_full_compute_queue_holds_the_host():
    """Six kernels of 1 ms, graphs cached: the host queues four, builds the fifth, then waits for the
    first to leave the card's queue (1 ms) to queue it, and only then builds the sixth."""
    ops = [Launch("k", 1000.0) for _ in range(6)]
    t = simulate_host(ops, HOST, MACHINE)
    builds = [s for s in t.spans if s.where == "host"]
    assert builds[4].start == pytest.approx(BUILD + 3 * RT.patch_us)
    assert builds[5].start == pytest.approx(BUILD + 1000.0)


def test_an_uncached_copy_builds_its_graph_and_waits_for_it():
    """Two copies on the graph path: each builds its graph (graph_us), runs and is heard of (completion)
    before the next is built; cached, the second transfer follows the first on the link at once."""
    ops = [Copy("d2h", 4096), Copy("d2h", 4096)]
    t = simulate_host(ops, HOST, MACHINE, cached_copies=False)
    assert t.end_us == pytest.approx(2 * (RT.graph_us + pcie_us(4096) + RT.completion_us))
    cached = simulate_host(ops, HOST, MACHINE)
    assert cached.end_us == pytest.approx(2 * pcie_us(4096) + RT.completion_us)


def test_a_warm_step_with_its_copies_in_ibms_three_modes():
    """A step's input copied in (8 KiB), one launch of 100 µs, its result copied out (4 KiB), every
    program built before. Graphs on both paths: each call builds its graph (graph_us) and waits for it
    to run and be heard of. Off the transfer path: the copy in is queued and runs while the host builds
    the launch's graph; the copy out is queued once the launch has returned. Off both: the host patches
    (20 µs) and queues; the kernel waits for the patch, the copy out for the kernel on the stream."""
    ops = [Copy("h2d", 8192), Launch("k", 100.0), Copy("d2h", 4096)]
    c, g = RT.completion_us, RT.graph_us

    def end(launches: bool, copies: bool) -> float:
        return simulate_host(ops, HOST, MACHINE, cached_launches=launches, cached_copies=copies, warm=True).end_us
    assert end(False, False) == pytest.approx(3 * (g + c) + pcie_us(8192) + 100.0 + pcie_us(4096))
    assert end(False, True) == pytest.approx(g + 100.0 + c + pcie_us(4096) + c)
    assert end(True, True) == pytest.approx(RT.patch_us + 100.0 + pcie_us(4096) + c)


def test_two_streams_and_an_event():
    """Stream 1's copy is issued after a Wait on stream 0's kernel: the host holds until the kernel is
    done, then builds nothing (cached) and the copy runs; without the event the copy runs at once."""
    ops = [Launch("k", 500.0, stream=0), Record("done", stream=0), Wait("done"), Copy("h2d", 1 << 20, stream=1)]
    t = simulate_host(ops, HOST, MACHINE)
    kernel_end = BUILD + 500.0
    copy = next(s for s in t.spans if s.where == "card0.dma_h2d")
    assert copy.start == pytest.approx(kernel_end + RT.completion_us)
    assert copy.end - copy.start == pytest.approx(pcie_us(1 << 20))
    free = simulate_host([ops[0], ops[3]], HOST, MACHINE)
    assert next(s for s in free.spans if s.where == "card0.dma_h2d").start == pytest.approx(BUILD)


def test_a_stream_never_reorders_its_work():
    rng = random.Random(3)
    ops = [Launch(f"p{rng.randrange(4)}", rng.uniform(1, 300), stream=rng.randrange(3)) if rng.random() < 0.6 else
           Copy(rng.choice(["h2d", "d2h"]), rng.randrange(1, 1 << 22), stream=rng.randrange(3)) for _ in range(60)]
    t = simulate_host(ops, HOST, MACHINE, cached_launches=bool(rng.randrange(2)), cached_copies=bool(rng.randrange(2)))
    device = sorted((s for s in t.spans if s.where != "host"), key=lambda s: s.start)
    for stream in range(3):
        mine = [s for s in device if ops[s.index].stream == stream]
        assert [s.index for s in mine] == sorted(s.index for s in mine)
        assert all(a.end <= b.start for a, b in zip(mine, mine[1:], strict=False))


def test_an_all_reduce_on_two_and_eight_cards():
    """S = 8 MiB. Two cards: 2 steps of 4 MiB pieces; eight: 14 steps of 1 MiB pieces. A step is the
    10 µs signal round, then the pieces out and in, each leg the slower of one card's link and the
    uplink carrying every member's piece (63 GB/s)."""
    s = 8 << 20
    for cards, piece, steps in ((2, 4 << 20, 2), (8, 1 << 20, 14)):
        leg = max(pcie_us(piece), cards * piece / 63_000)
        want = DRAWER.collective_fixed_us + steps * (DRAWER.step_latency_us + 2 * leg)
        assert collective_us("all_reduce", s, cards, DRAWER, pcie_us) == pytest.approx(want)
        t = simulate_host([Collective("all_reduce", s, tuple(range(cards)))], HOST, MACHINE, cards=cards)
        assert t.end_us == pytest.approx(want)


@pytest.mark.parametrize("kind", ["all_reduce", "reduce_scatter", "all_gather", "broadcast", "send_recv"])
def test_more_cards_are_never_faster_than_the_uplink_allows(kind):
    """Whatever the card count, every byte a collective must move crosses the uplink out and in."""
    s = 16 << 20
    for cards in range(2, 9):
        p = plan(kind, cards, s)
        moved = p.steps * (p.senders * p.out_bytes + p.receivers * p.in_bytes)
        assert collective_us(kind, s, cards, DRAWER, pcie_us) >= moved / 63_000


def test_bad_host_input_is_one_line():
    with pytest.raises(ConfigError, match="--cards: a drawer holds 1 to 8 cards, got 9"):
        simulate_host([], HOST, MACHINE, cards=9)
    with pytest.raises(ConfigError, match=r"ops\[0\]: card 1 is not in this drawer of 1"):
        simulate_host([Launch("k", 1.0, card=1)], HOST, MACHINE)
    with pytest.raises(ConfigError, match=r"ops\[0\]: waits for event 'e', never recorded before"):
        simulate_host([Wait("e")], HOST, MACHINE)
    with pytest.raises(ConfigError, match="runtime.compute_queue_entries: must be positive, got 0"):
        load_host(None, ["runtime.compute_queue_entries=0"])
    with pytest.raises(ConfigError, match="--set runtime.patch_us=-1: runtime.patch_us: must be at least 0"):
        load_host(None, ["runtime.patch_us=-1"])


def test_a_cpu_op_is_its_dispatch_then_the_longer_of_arithmetic_and_memory():
    cpu = load_host(None, ["cpu.gflops=100", "cpu.gbytes_per_s=10", "cpu.op_us=5"]).cpu
    assert cpu.op_time_us(2_000_000, 100_000) == 5 + 20.0   # 2 MFLOP at 100 GFLOP/s: 20 us > 100 kB at 10 GB/s
    assert cpu.op_time_us(1_000, 300_000) == 5 + 30.0       # memory-bound: 300 kB at 10 GB/s
    with pytest.raises(ConfigError, match="cpu.gflops: must be positive, got 0"):
        load_host(None, ["cpu.gflops=0"])
