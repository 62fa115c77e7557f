"""Tensor-parallel ranks: one host process per card, collectives meeting across ranks, warm steps.
Every expected time is derived by hand from configs/host.toml and the card's PCIe figures."""

from __future__ import annotations

import pytest

from spyre_emu.errors import ConfigError
from spyre_emu.host import Collective, Launch, collective_us, simulate_host, simulate_ranks
from tests.host.hand import DRAWER, HOST, MACHINE, RT, pcie_us


def test_a_warm_launch_only_patches():
    """A later step of a serving loop: the program was built before, so the launch is patched (20 µs);
    on the graph path its graph is built again (graph_us), not deserialized and prepared."""
    t = simulate_host([Launch("k", 100.0)], HOST, MACHINE, warm=True)
    assert t.end_us == pytest.approx(RT.patch_us + 100.0 + RT.completion_us)
    rebuilt = simulate_host([Launch("k", 100.0)], HOST, MACHINE, warm=True, cached_launches=False)
    assert rebuilt.end_us == pytest.approx(RT.graph_us + 100.0 + RT.completion_us)


def test_ranks_build_in_parallel_and_meet_at_the_all_reduce():
    """Rank 0 runs a 100 µs kernel, rank 1 a 300 µs one, each after its own build (two host processes,
    not one thread building twice); the all-reduce of 1 MiB starts once the host has seen rank 1's end."""
    s = 1 << 20
    ranks = [[Launch("k", us, card=r), Collective("all_reduce", s, (0, 1)), Launch("k", 50.0, card=r)]
             for r, us in enumerate((100.0, 300.0))]
    t = simulate_ranks(ranks, HOST, MACHINE, warm=True)
    meet = RT.patch_us + 300.0 + RT.completion_us
    leg = max(pcie_us(s // 2), 2 * (s // 2) / 63_000)
    reduce = DRAWER.collective_fixed_us + 2 * (DRAWER.step_latency_us + 2 * leg)
    assert reduce == pytest.approx(collective_us("all_reduce", s, 2, DRAWER, pcie_us))
    drawer = next(s for s in t.spans if s.where == "drawer")
    assert (drawer.start, drawer.end) == pytest.approx((meet, meet + reduce))
    # after it each rank patches its next launch, and both cards run it side by side
    assert t.end_us == pytest.approx(meet + reduce + RT.patch_us + 50.0 + RT.completion_us)
    assert t.busy_us("host.rank0") == t.busy_us("host.rank1") == pytest.approx(2 * RT.patch_us)
    one_thread = simulate_host([Launch("k", 100.0, card=0), Launch("k", 300.0, card=1)], HOST, MACHINE, cards=2,
                               warm=True)
    assert one_thread.busy_us("host") == pytest.approx(2 * RT.patch_us)


def test_ranks_must_agree_and_keep_to_their_card():
    with pytest.raises(ConfigError, match=r"ranks\[1\]\[0\]: rank 1 issues work for another card"):
        simulate_ranks([[], [Launch("k", 1.0, card=0)]], HOST, MACHINE)
    bad = [[Collective("all_reduce", 64, (0, 1))], [Collective("all_gather", 64, (0, 1))]]
    with pytest.raises(ConfigError, match="ranks disagree on collective 0 of cards"):
        simulate_ranks(bad, HOST, MACHINE)
