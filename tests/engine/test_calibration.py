"""The DRAM model against silicon (DESIGN.md §3): 32 cores streaming, default config.

The figures come out of the timing parameters (bank state, refresh, turnaround), not
from a bandwidth cap; see docs/decisions/dram.md for how the assumed values were chosen.
"""

import pytest

from spyre_emu.engine.log import CHANNEL_STATS

MB = 1 << 20


def _stream(run_units, machine, read_mb, write_mb):
    cores = {}
    for c in range(32):
        units = {}
        if read_mb:
            units["load"] = [{"op": "load", "dram": f"x+{c * read_mb * MB}", "lx": 0, "bytes": read_mb * MB}]
        if write_mb:
            units["store"] = [{"op": "store", "lx": MB, "dram": f"y+{c * write_mb * MB}", "bytes": write_mb * MB}]
        cores[c] = units
    log = run_units(machine, cores, buffers={"x": {"bytes": 64 * MB}, "y": {"bytes": 64 * MB}})
    return 32 * (read_mb + write_mb) * MB / log.total_cycles * machine.clock.ghz


def test_pure_read_near_150_gbps(run_units, spyre):
    assert _stream(run_units, spyre, 2, 0) == pytest.approx(150, abs=8)


def test_balanced_read_write_near_105_gbps(run_units, spyre):
    assert _stream(run_units, spyre, 1, 1) == pytest.approx(105, abs=8)


def _pieces(run_units, machine, phased):
    """What a 32-core pointwise kernel moves: each core reads, then writes, 512 KB in 8 KB pieces, the
    cores' pieces side by side (core c at c x 8 KB, stride 256 KB); ``phased``: the stores wait for
    the loads."""
    cores = {}
    for c in range(32):
        load = {"op": "load", "dram": f"x+{c * 8192}", "lx": 0, "bytes": MB // 2, "piece": 8192, "stride": 32 * 8192}
        store = {"op": "store", "lx": MB, "dram": f"y+{c * 8192}", "bytes": MB // 2, "piece": 8192,
                 "stride": 32 * 8192}
        if phased:
            load["signal"], store["wait"] = ["read"], ["read"]
        cores[c] = {"load": [load], "store": [store]}
    log = run_units(machine, cores, buffers={"x": {"bytes": 16 * MB}, "y": {"bytes": 16 * MB}})
    turns = int(log.channel_stats[:, CHANNEL_STATS.index("turnarounds")].sum())
    return 32 * MB / log.total_cycles * machine.clock.ghz, turns


def test_reads_and_writes_pay_turnarounds_only_when_they_overlap(run_units, spyre):
    """The same bytes at the same addresses: read and written at once, the bus turns at almost every
    request (65,498 turnarounds) and the pair moves at the balanced rate; all reads before all writes
    (what a kernel in two LX-sized steps did), it turns a few hundred times and each half runs at its
    one-way rate (docs/decisions/dram.md)."""
    overlapped, turns = _pieces(run_units, spyre, phased=False)
    assert overlapped == pytest.approx(105, abs=8)
    assert turns > 60000
    phased, turns = _pieces(run_units, spyre, phased=True)
    assert phased == pytest.approx(150, abs=8)
    assert turns < 1000
