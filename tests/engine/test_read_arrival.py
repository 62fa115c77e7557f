"""A read request enters its channel's queue at issue, stamped with its arrival (dma.issue_nb); the channel
picks as if the arrival were an event. Derived by hand on configs/tiny.toml, with hop chaining on and off.

tiny: H = 2; to mc0 core1 is 3 hops (6 cycles), core3 1 hop (2); channel = address bit 8; bank =
(row index ^ row index // 2) % 2 of the channel-local 1 KB row; one stick = 4 cycles; tRCD 10, tRL 5, tWL 3,
tRP 7, tRAS 20, tWR 6, tWTR 4, tRTW 2. A stick back from mc0 lands at its core after the hops and is
written the next cycle (the load's end). Units start in unit order at 0: core1's before core3's.
Addresses, all on channel 0: 0 and 512 (bank 0, row 0), 2048 (bank 1, row 0), 6144 (bank 0, row 1).
"""

import numpy as np
import pytest

from spyre_emu.engine import layout as L
from spyre_emu.engine.dram import pick_nb, queue_read_nb
from spyre_emu.engine.log import UNIT_STATS


def _load(addr, **extra):
    return {"op": "load", "dram": addr, "lx": 0, "bytes": 128, **extra}


def _store(addr):
    return {"op": "store", "lx": 0, "dram": addr, "bytes": 128}


@pytest.mark.parametrize("chain", [True, False])
def test_requests_reaching_a_channel_out_of_issue_order(tiny, run_units, chain):
    """core1 issues A (address 0) first, arriving at 6, and arms the idle channel for 6; core3 issues B
    (6144) next, arriving at 2: the channel picks at 2, B first. B: ACT 2, column 12, data 17..21, back at
    23, done 24. The channel picks again at max(2, column 12, A's arrival 6) = 12 (the pick armed for 6
    is stale): A conflicts with B's open row: PRE at max(12, ACT 2 + tRAS) = 22, ACT 29, column 39, data
    44..48, back at 54, done 55. Each unit's DRAM stall is its data start - its pick - tRL: A 27, B 10 (the
    stale pick at 6 serves nothing; had it served A, at its command cycle 12, A's stall would be 33).
    (A pick at 6, the first one armed: B's data 21..25 and done 28, A's PRE 26, data 48..52, done 59.)"""
    log = run_units(tiny, {1: {"load": [_load(0)]}, 3: {"load": [_load(6144)]}}, chain_hops=chain)
    assert log.end.tolist() == [55, 24]
    assert log.channel_stats[0].tolist()[4:6] == [1, 1]  # one miss, one conflict
    units = [log.unit_names.index("core1.load"), log.unit_names.index("core3.load")]
    assert log.unit_stats[units, UNIT_STATS.index("stall_dram_cycles")].tolist() == [27, 10]


@pytest.mark.parametrize("chain", [True, False])
def test_write_reaching_a_channel_armed_for_a_later_read(tiny, run_units, chain):
    """core1's read of 6144 arrives at 6 and arms the channel for 6 at its issue. core3's store of 0
    reaches the controller at 2: the idle channel picks at 2, the write first. ACT 2, column 12, data
    15..19: the store ends at 19. The read is picked at max(2, 12, 6) = 12: it conflicts: PRE at
    max(12, ACT 2 + tRAS, write end 19 + tWR) = 25, ACT 32, column 42, data max(47, 19 + tWTR + tRL) =
    47..51, back at 57, done 58. (The write left for the read's pick at 6: the read first, done 32, the
    write's data 46..50.)"""
    log = run_units(tiny, {1: {"load": [_load(6144)]}, 3: {"store": [_store(0)]}}, chain_hops=chain)
    assert log.end.tolist() == [58, 19]


@pytest.mark.parametrize("chain", [True, False])
def test_waiting_write_is_picked_before_a_read_on_its_way(tiny_with, run_units, chain):
    """With 8-cycle hops: core1 reads 512 (arrives at 24), core3 reads 0 (arrives at 8) and stores to
    2048 (its stick reaches mc0 at 8). At 8 the read of 0 is picked (no direction yet: reads first):
    ACT 8, column 18, data 23..27, back at 35, done 36. The write waits: the channel picks again at
    max(8, column 18) = 18, whatever the read on its way: the write, bank 1: ACT 18, column 28, data
    max(31, the bus 27 + tRTW) = 31..35, done 35. Then the read of 512, picked at max(18, column 28,
    arrival 24) = 28: a row hit, column 28, data max(33, 35 + tWTR + tRL) = 44..48, back at 72, done 73.
    (A pick at the read's arrival, 24: the write's data 37..41.)"""
    machine = tiny_with("ring.hop_latency_cycles=8")
    log = run_units(machine, {1: {"load": [_load(512)]}, 3: {"load": [_load(0)], "store": [_store(2048)]}},
                    chain_hops=chain)
    assert log.end.tolist() == [73, 36, 35]


def test_read_queue_keeps_the_order_of_arrival_events():
    """``queue_read_nb`` against sorted lists: random issues to two channels of one controller (each unit a
    fixed distance from it; several calls per cycle, in any unit order) and picks of arrived heads, request
    slots reused as soon as freed. After every cycle each queue holds its requests in (arrival, unit, issue)
    order, each on its way with the first of its unit's and arrival's run as ``K_FIRST``, and each pick took
    the first that had arrived."""
    rng = np.random.default_rng(42)
    hops = rng.integers(1, 9, size=8)
    ch = np.zeros((2, L.D_COLS), np.int64)
    ch[:, [L.D_QHEAD_R, L.D_QTAIL_R, L.D_QHEAD_W, L.D_LAST_T]] = -1
    chunk = np.zeros((64, L.K_COLS), np.int64)
    free, queued, number = list(range(64)), ([], []), 0
    for t in range(3000):
        for c in (0, 1):
            for _ in range(int(rng.integers(0, 3))):  # picks: the channel is sometimes the bottleneck
                k, is_write = pick_nb(ch, chunk, c, t)
                arrived = [r for r in queued[c] if r[0] <= t]
                assert k == (min(arrived)[3] if arrived else -1)
                assert not is_write
                if arrived:
                    queued[c].remove(min(arrived))
                    free.append(k)
        for u in rng.integers(0, 8, size=int(rng.integers(0, 6))):  # issue calls, any unit order
            for _ in range(int(rng.integers(1, 4))):
                if free:
                    k, c = free.pop(), int(rng.integers(0, 2))
                    chunk[k, L.K_UNIT] = u
                    queue_read_nb(ch, chunk, c, k, t + 2 * hops[u], t)
                    queued[c].append((t + 2 * hops[u], int(u), number, k))
                    number += 1
        for c in (0, 1):
            order, k = [], ch[c, L.D_QHEAD_R]
            while k >= 0:
                order.append(int(k))
                k = chunk[k, L.K_NEXT]
            expected = sorted(queued[c])
            assert order == [r[3] for r in expected]
            firsts = [r[3] if j == 0 or expected[j - 1][:2] != r[:2] else None for j, r in enumerate(expected)]
            for j in range(1, len(firsts)):
                firsts[j] = firsts[j] if firsts[j] is not None else firsts[j - 1]
            on_the_way = [j for j, r in enumerate(expected) if r[0] > t]  # a picked run's first is gone
            assert chunk[order, L.K_FIRST][on_the_way].tolist() == [firsts[j] for j in on_the_way]
    assert number > 4000
