"""The event queue pops in the canonical order (cycle, kind, payload), whatever the push order, over
the calendar window and the far heap, with many identical events (they need no tie-break), whether
pushed by ``push_nb`` or by ``push_tail_nb`` (its append at the tail inlined), and with gaps that make
the pop step over empty groups of buckets at once."""

import heapq

import numpy as np

from spyre_emu.engine import layout as L
from spyre_emu.engine.queue import GROUP, WINDOW, new_queue, pop_nb, push_nb, push_tail_nb


def _row(ev, slot):
    return tuple(int(x) for x in ev[slot, L.E_TIME:L.E_P4 + 1])


def test_each_pop_is_the_least_event_queued():
    rng = np.random.default_rng(31)
    ev, qa = new_queue(4096)
    assert ev.ctypes.data % 64 == 0  # one cache line per event row
    assert ev.shape[1] * ev.itemsize == 64
    reference: list[tuple] = []  # the same events in a heap, in Python
    now, pops, identical, tails = 0, 0, 0, 0
    for _ in range(30):
        for _ in range(int(rng.integers(1, 200))):  # never before the current cycle, some beyond the window
            row = (now + int(rng.choice([0, 1, 2, 5, GROUP - 1, GROUP, GROUP + 1, 1000,
                                                      WINDOW - 1, WINDOW + 3, 3 * WINDOW])),
                   *(int(x) for x in rng.integers(0, 2, 6)))  # few values: many identical events
            identical += row in reference
            tail = bool(rng.integers(2))
            tails += tail
            assert (push_tail_nb if tail else push_nb)(ev, qa, *row)
            heapq.heappush(reference, row)
        for _ in range(int(rng.integers(0, 250))):
            slot = pop_nb(ev, qa)
            if slot < 0:
                assert not reference
                break
            assert _row(ev, slot) == heapq.heappop(reference)
            now, pops = _row(ev, slot)[0], pops + 1
    while (slot := pop_nb(ev, qa)) >= 0:
        assert _row(ev, slot) == heapq.heappop(reference)
    assert not reference
    assert pops > 1000
    assert identical > 100
    assert tails > 1000
