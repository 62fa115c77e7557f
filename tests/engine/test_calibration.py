"""The DRAM model against silicon (DESIGN.md §3): 32 cores streaming, default config.

The figures come out of the timing parameters (bank state, refresh, turnaround), not
from a bandwidth cap; see docs/decisions/dram.md for how the assumed values were chosen.
"""

import pytest

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
