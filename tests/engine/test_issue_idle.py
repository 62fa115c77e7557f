"""The loop spares the call to ``dma.issue_nb`` after a delivery when ``dma._idle_nb`` says it would do
nothing: that shortcut is exact only if the test is, so both are run on many unit states and
compared: ``_idle_nb`` holds exactly when ``issue_nb`` changes no array of the engine state."""

import numpy as np

from spyre_emu.engine import layout as L
from spyre_emu.engine.dma import _idle_nb, issue_nb
from spyre_emu.engine.pack import pack, unit_index
from spyre_emu.unit_program import parse_unit_program
from tests.conftest import program

STICK = 128


def _state(machine):
    """A packed one-load program (pieces of 512 B every 1 KB), its load unit at its instruction."""
    load = {"op": "load", "dram": 0, "lx": 0, "bytes": 64 * STICK, "piece": 4 * STICK, "stride": 8 * STICK}
    st = pack(parse_unit_program(program({0: {"load": [load]}}), machine), machine, 1 << 62).state
    return st, unit_index(machine, 0, "load")


def _random_unit(us, u, rng, t):
    """A unit state issue_nb may meet: some bytes left, a piece set up before or after ``t``, its wake
    scheduled or not, a budget anywhere from empty to full."""
    left = int(rng.integers(0, 5)) * STICK
    us[u, L.U_ISSUE_LEFT] = left
    us[u, L.U_PIECE_LEFT] = min(left, int(rng.integers(1, 5)) * STICK) if left else 4 * STICK
    us[u, L.U_ADDR] = int(rng.integers(0, 64)) * STICK
    us[u, L.U_PIECE_AT] = t + int(rng.integers(-3, 4))
    us[u, L.U_WAKE] = us[u, L.U_PIECE_AT] if rng.random() < 0.5 else -1
    us[u, L.U_INFLIGHT] = int(rng.integers(0, 513)) * STICK
    us[u, L.U_BUSY] = 1


def test_idle_exactly_when_issue_changes_nothing(spyre):
    base, u = _state(spyre)
    rng = np.random.default_rng(13)
    seen = {True: 0, False: 0}
    for _ in range(400):
        st = tuple(a.copy() for a in base)
        t = 1000
        _random_unit(st[L.ST_US], u, rng, t)
        before = [a.copy() for a in st]
        idle = _idle_nb(st[L.ST_US][u], st[L.ST_CFG], t)
        assert issue_nb(st[L.ST_INS], st[L.ST_US], st[L.ST_CFG], st[L.ST_CH], st[L.ST_CHUNK], st[L.ST_CHAN_STOP],
                        st[L.ST_PENDING], st[L.ST_EV], st[L.ST_QA], u, t)
        unchanged = all(np.array_equal(a, b) for a, b in zip(before, st, strict=True))
        assert idle == unchanged, st[L.ST_US][u]
        seen[idle] += 1
    assert min(seen.values()) > 50, seen  # both answers drawn often
