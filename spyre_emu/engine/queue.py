"""The event queue: a calendar of per-cycle sorted buckets, with a heap for far events.

Order is canonical: (cycle, kind, payload). Identical events (the same in all three) are
interchangeable: the handler is called with the same arguments whichever comes first, so
they need no tie-break (a bucket keeps them in push order). Events of one cycle are thus
handled in an order fixed by what they are (a fixed-priority arbiter: lower stop,
destination, unit first), never by when they happened to be scheduled, so skipping
events that provably change nothing (ring hop chaining) cannot reorder the rest. Events
within ``WINDOW`` cycles go into that cycle's bucket, kept sorted (almost always an append
at the tail); further ones wait in a heap.

Two arrays hold everything so jitted callers pass little: ``ev`` (one row per event
slot, one 64-byte cache line each: a walk along a bucket reads one line per event passed)
and ``qa`` (counters, bucket heads and tails and the tails' keys, events per group of ``GROUP`` buckets, the far
heap, the free list). The group counts let the pop step over an empty group of cycles at
once: a program of long fixed-duration steps (PT passes of ~1,000 cycles) otherwise spends
as long stepping over empty cycles as handling its events. At 1533cae the
queue was about half of the loop's time on a streaming read (docs/speed.md, session 31).
"""

import numpy as np

from . import layout as L
from .jit import U, njit

WINDOW = 4096  # cycles the calendar covers; a power of two
GROUP = 64  # buckets counted together (a power of two dividing WINDOW)
Q_COUNT, Q_FREE, Q_CUR, Q_HEAP = range(4)
_HEAD = 8
_TAIL = _HEAD + WINDOW
_GROUPS = _TAIL + WINDOW
# Per bucket, its tail's (kind, p0) as kind << 32 | p0 (p0, a stop, unit, channel or FIFO, is small and never
# negative, so the key orders as the pair): an append is decided without reading the tail's row, pushed
# long before and mostly out of the cache (its load was 3.4 % of the loop's samples on a streaming read;
# docs/speed.md, session 43). Rows are compared only when the pair is equal.
_KEYS = _GROUPS + WINDOW // GROUP
_HEAPS = _KEYS + WINDOW


def new_queue(capacity: int) -> tuple[np.ndarray, np.ndarray]:
    buffer = np.zeros((capacity + 1) * L.E_COLS, np.int64)  # a row of slack to start on a 64-byte line
    first = -buffer.ctypes.data % 64 // 8  # numpy aligns to 16 bytes only
    ev = buffer[first:first + capacity * L.E_COLS].reshape(capacity, L.E_COLS)
    qa = np.zeros(_HEAPS + 2 * capacity, np.int64)
    qa[_HEAD:_GROUPS] = -1
    qa[_HEAPS + capacity:] = np.arange(capacity - 1, -1, -1)
    qa[Q_FREE] = capacity
    return ev, qa


def pending(qa: np.ndarray) -> int:
    return int(qa[Q_COUNT] + qa[Q_HEAP])


@njit(cache=True, _nrt=False, inline="always")
def push_nb(ev, qa, time, kind, p0, p1=0, p2=0, p3=0, p4=0):
    """Schedule an event at ``time`` (never before the current cycle); False when full. A wrapper copied
    into each call site (numba IR): it makes every argument ``int64``, so ``_push_nb`` (LLVM-inlined) has one
    compiled version whatever the call site passes (a bare ``0`` or an omitted default would each be a
    version of their own)."""
    return _push_nb(ev, qa, np.int64(time), np.int64(kind), np.int64(p0), np.int64(p1), np.int64(p2),
                    np.int64(p3), np.int64(p4))


@njit(cache=True, _nrt=False, forceinline=True)
def _push_nb(ev, qa, time, kind, p0, p1, p2, p3, p4):
    """``push_nb`` with every argument given, each an ``int64``."""
    if qa[Q_FREE] == 0:
        return False
    slot = _row_nb(ev, qa, time, kind, p0, p1, p2, p3, p4)
    if time < qa[Q_CUR] + WINDOW:
        _insert_nb(ev, qa, slot)
    else:
        _heap_push_nb(ev, qa, slot)
    return True


@njit(cache=True, _nrt=False, forceinline=True)
def push_tail_nb(ev, qa, time, kind, p0, p1, p2, p3, p4):
    """``push_nb`` with the append at its cycle's tail inlined (the walk before the tail, and the far heap,
    stay calls): for the push ending each stick's travel, half of all pushes on a streaming read."""
    if time >= qa[Q_CUR] + WINDOW or qa[Q_FREE] == 0:
        return _push_nb(ev, qa, time, kind, p0, p1, p2, p3, p4)
    b = time & (WINDOW - 1)
    tail = qa[_TAIL + b]
    key, tail_key = (kind << 32) | p0, qa[_KEYS + b]
    if qa[_HEAD + b] >= 0 and (tail_key > key or tail_key == key
                               and not _tail_before_nb(ev, tail, kind, p0, p1, p2, p3, p4)):
        return _push_nb(ev, qa, time, kind, p0, p1, p2, p3, p4)
    slot = _row_nb(ev, qa, time, kind, p0, p1, p2, p3, p4)
    ev[U(slot), L.E_NEXT] = -1
    qa[Q_COUNT] += 1
    qa[_GROUPS + b // GROUP] += 1
    if qa[_HEAD + b] < 0:
        qa[_HEAD + b] = slot
    else:
        ev[U(tail), L.E_NEXT] = slot
    qa[_TAIL + b] = slot
    qa[_KEYS + b] = key
    return True


@njit(cache=True, _nrt=False, forceinline=True)
def _row_nb(ev, qa, time, kind, p0, p1, p2, p3, p4):
    """Take a free row (there is one) and fill it with the event; its slot."""
    cap = ev.shape[0]
    qa[Q_FREE] -= 1
    slot = qa[U(_HEAPS + cap + qa[Q_FREE])]
    row = ev[U(slot)]
    row[L.E_TIME] = time
    row[L.E_KIND] = kind
    row[L.E_P0] = p0
    row[L.E_P1] = p1
    row[L.E_P2] = p2
    row[L.E_P3] = p3
    row[L.E_P4] = p4
    return slot


@njit(cache=True, _nrt=False, forceinline=True)
def _tail_before_nb(ev, tail, kind, p0, p1, p2, p3, p4):
    """Whether the queued event ``tail`` does not come after (kind, p0..p4) of its cycle."""
    r = ev[U(tail)]
    if r[L.E_KIND] != kind:
        return r[L.E_KIND] < kind
    if r[L.E_P0] != p0:
        return r[L.E_P0] < p0
    if r[L.E_P1] != p1:
        return r[L.E_P1] < p1
    if r[L.E_P2] != p2:
        return r[L.E_P2] < p2
    if r[L.E_P3] != p3:
        return r[L.E_P3] < p3
    return r[L.E_P4] <= p4


@njit(cache=True, _nrt=False, forceinline=True)
def _earlier_nb(ev, a, b):
    """Whether event slot ``a`` comes strictly before ``b``: (time, kind, payload)."""
    if ev[a, L.E_TIME] != ev[b, L.E_TIME]:
        return ev[a, L.E_TIME] < ev[b, L.E_TIME]
    return _same_cycle_earlier_nb(ev, a, b)


@njit(cache=True, _nrt=False, forceinline=True)
def _same_cycle_earlier_nb(ev, a, b):
    """``_earlier_nb`` for two events of one cycle (one bucket holds one cycle): kind, then payload."""
    ra, rb = ev[U(a)], ev[U(b)]
    for col in range(L.E_KIND, L.E_P4 + 1):
        if ra[col] != rb[col]:
            return ra[col] < rb[col]
    return False


@njit(cache=True, _nrt=False)
def _insert_nb(ev, qa, slot):
    """Put ``slot`` into its cycle's bucket at its place in the canonical order."""
    b = ev[U(slot), L.E_TIME] & (WINDOW - 1)
    qa[Q_COUNT] += 1
    qa[_GROUPS + b // GROUP] += 1
    tail = qa[_TAIL + b]
    key = (ev[U(slot), L.E_KIND] << 32) | ev[U(slot), L.E_P0]
    tail_key = qa[_KEYS + b]
    if qa[_HEAD + b] < 0 or tail_key < key or tail_key == key and not _same_cycle_earlier_nb(ev, slot, tail):
        ev[U(slot), L.E_NEXT] = -1
        if qa[_HEAD + b] < 0:
            qa[_HEAD + b] = slot
        else:
            ev[U(tail), L.E_NEXT] = slot
        qa[_TAIL + b] = slot
        qa[_KEYS + b] = key
        return
    prev, cur = -1, qa[_HEAD + b]
    while not _same_cycle_earlier_nb(ev, slot, cur):
        prev, cur = cur, ev[U(cur), L.E_NEXT]
    ev[U(slot), L.E_NEXT] = cur
    if prev < 0:
        qa[_HEAD + b] = slot
    else:
        ev[U(prev), L.E_NEXT] = slot


@njit(cache=True, _nrt=False)
def _heap_push_nb(ev, qa, slot):
    i = qa[Q_HEAP]
    qa[Q_HEAP] += 1
    qa[_HEAPS + i] = slot
    while i > 0:
        parent = (i - 1) >> 1
        if not _earlier_nb(ev, qa[_HEAPS + i], qa[_HEAPS + parent]):
            break
        qa[_HEAPS + i], qa[_HEAPS + parent] = qa[_HEAPS + parent], qa[_HEAPS + i]
        i = parent


@njit(cache=True, _nrt=False)
def _heap_pop_nb(ev, qa):
    top = qa[_HEAPS]
    qa[Q_HEAP] -= 1
    n = qa[Q_HEAP]
    qa[_HEAPS] = qa[_HEAPS + n]
    i = 0
    while True:
        child = 2 * i + 1
        if child >= n:
            break
        if child + 1 < n and _earlier_nb(ev, qa[_HEAPS + child + 1], qa[_HEAPS + child]):
            child += 1
        if not _earlier_nb(ev, qa[_HEAPS + child], qa[_HEAPS + i]):
            break
        qa[_HEAPS + i], qa[_HEAPS + child] = qa[_HEAPS + child], qa[_HEAPS + i]
        i = child
    return top


@njit(cache=True, _nrt=False, forceinline=True)
def pop_nb(ev, qa):
    """Remove the earliest event and return its slot (valid until the next push), or -1."""
    while True:
        if qa[Q_COUNT] == 0:
            if qa[Q_HEAP] == 0:
                return -1
            qa[Q_CUR] = ev[qa[_HEAPS], L.E_TIME]
        while qa[Q_HEAP] > 0 and ev[qa[_HEAPS], L.E_TIME] < qa[Q_CUR] + WINDOW:
            _insert_nb(ev, qa, _heap_pop_nb(ev, qa))
        b = qa[Q_CUR] & (WINDOW - 1)
        slot = qa[_HEAD + b]
        if slot < 0:  # the next cycle, or the next group's first if this group's buckets are all empty
            qa[Q_CUR] = (qa[Q_CUR] | (GROUP - 1)) + 1 if qa[_GROUPS + b // GROUP] == 0 else qa[Q_CUR] + 1
            continue
        qa[_HEAD + b] = ev[U(slot), L.E_NEXT]
        qa[Q_COUNT] -= 1
        qa[_GROUPS + b // GROUP] -= 1
        cap = ev.shape[0]
        qa[U(_HEAPS + cap + qa[Q_FREE])] = slot
        qa[Q_FREE] += 1
        return slot


@njit(cache=True, _nrt=False, inline="always")
def at_nb(st, t, kind, p0, p1=0, p2=0, p3=0, p4=0):
    """``push_nb`` on the state tuple built by ``pack``."""
    return push_nb(st[L.ST_EV], st[L.ST_QA], t, kind, p0, p1, p2, p3, p4)
