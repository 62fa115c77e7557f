"""The bidirectional ring: shortest-direction routes and per-link, per-stick arbitration.

Timing contract: a link carries one 128 B stick per cycle per direction; an LX-to-LX (send)
stick holds it for ``send_stick_cycles``. A stick that reaches a stop at cycle t leaves on its
next link at max(t, the end of the link's previous stick) and reaches the next stop
``hop_latency`` cycles later. Sticks contend
first come, first served (ties in event order). Routes take the shorter direction;
equal distances go clockwise (towards higher stop numbers).

A multicast copy (a load to several cores) is written into the LX of every destination it passes
and goes on; its write at each of them is an event at its arrival cycle.

Every hop is an event, except where taking the next hop at once provably gives the same
answer (``cfg[C_CHAIN]``): a link out of stop s in direction d is fed only by the link
into s in direction d, first come first served, and by sticks put on the ring at s. So a
stick may cross s within the current event when no earlier stick still waits to be handled
at (s, d) and nothing can be put on the ring at s before the stick arrives there: the stop's
store and send units have no instructions left or cannot issue before the arrival (a piece's
set-up comes first), or, at a memory controller, the arrival is earlier than any data the
controller has scheduled or could still schedule (now + tRL + one stick).
A multicast copy chains past its destinations the same way: its write at a destination it
passes is left behind as an event of its own (``ROLE_LAND``), in the place the copy's arrival
there would have in the canonical order (no other stick of the same unit can reach the same
stop, bound the same way, in the same cycle), and the write changes nothing the copy's onward
travel reads (links, ``pending``, the stops' store and send units).
``tests/engine/test_hop_chaining.py`` checks the two modes give identical logs.
A core's load unit's read stick reaching its destination is an ``EV_LAND``, the last kind in its cycle, so its
push is an append (docs/decisions/event-order.md says why the order is the same).
"""


from . import layout as L
from .jit import U, njit
from .queue import at_nb, push_nb, push_tail_nb


@njit(cache=True, _nrt=False, forceinline=True)
def _clockwise_nb(cfg, src, dst):
    """Hops from ``src`` to ``dst`` clockwise; without ``%``: a division by a value known only at run
    time costs tens of cycles, on every hop of the loop's critical path."""
    cw = dst - src
    return cw + cfg[L.C_STOPS] if cw < 0 else cw


@njit(cache=True, _nrt=False, forceinline=True)
def hops_nb(cfg, src, dst):
    cw = _clockwise_nb(cfg, src, dst)
    return min(cw, cfg[L.C_STOPS] - cw)


@njit(cache=True, _nrt=False, forceinline=True)
def direction_nb(cfg, stop, dst):
    """0 clockwise, 1 counter-clockwise: the shorter way, ties clockwise."""
    cw = _clockwise_nb(cfg, stop, dst)
    return 0 if cw <= cfg[L.C_STOPS] - cw else 1


@njit(cache=True, _nrt=False)
def legs_nb(cfg, src, mask):
    """A multicast from ``src``: the farthest destination in ``mask`` each way (-1: none that way)."""
    cw, ccw, cw_hops, ccw_hops = -1, -1, 0, 0
    for stop in range(cfg[L.C_STOPS]):
        if (mask >> stop) & 1:
            h = hops_nb(cfg, src, stop)
            if direction_nb(cfg, src, stop) == 0:
                if h > cw_hops:
                    cw, cw_hops = stop, h
            elif h > ccw_hops:
                ccw, ccw_hops = stop, h
    return cw, ccw


@njit(cache=True, _nrt=False, forceinline=True)
def stick_at_nb(cfg, pending, ev, qa, t, stop, dst, u, role, x):
    """Schedule a stick's arrival at ``stop``, counting it as waiting there unless it is home."""
    if stop != dst:
        pending[U(2 * stop + direction_nb(cfg, stop, dst))] += 1
    return push_nb(ev, qa, t, L.EV_STICK, stop, dst, u, role, x)


@njit(cache=True, _nrt=False, forceinline=True)
def _injection_horizon_nb(st, stop, now):
    """The earliest cycle at which a stick could still be put on the ring at ``stop``."""
    stops, us, cfg = st[L.ST_STOPS], st[L.ST_US], st[L.ST_CFG]
    kind = stops[U(stop), L.R_KIND]
    if kind == L.STOP_MEMORY:
        return now + cfg[L.C_RL] + cfg[L.C_STICK_CYC]
    horizon = L.NEVER
    if kind == L.STOP_UNITS:
        for j in (L.R_INJ0, L.R_INJ1):
            u = stops[U(stop), j]
            if u >= 0 and us[U(u), L.U_PC] < us[U(u), L.U_END]:
                horizon = min(horizon, _unit_horizon_nb(us, cfg, u, now))
    return horizon


@njit(cache=True, _nrt=False, forceinline=True)
def _unit_horizon_nb(us, cfg, u, now):
    """The earliest cycle a core's store or send unit with work left could put a stick on the ring.
    Its sticks go on at their port cycle, never before the request that issues them, and a store or
    send issues nothing of a piece before the piece is set up (dma.issue_nb): a unit between
    instructions starts its next at ``now`` at the earliest, so issues at ``now + piece_setup``; a
    busy one still setting up a piece issues at its end. Sticks already issued are events, counted
    in ``pending``. The host's PCIe unit has no set-up: ``now``."""
    if us[U(u), L.U_CORE] < 0:
        return now
    if us[U(u), L.U_BUSY] == 0:
        return now + cfg[L.C_PIECE_SETUP]
    return max(now, us[U(u), L.U_PIECE_AT])


@njit(cache=True, _nrt=False, forceinline=True)
def travel_nb(st, stop, dst, u, role, x, t):
    """A stick at ``stop`` (not its destination) crosses links until it must wait for an event."""
    cfg, link, pending, us = st[L.ST_CFG], st[L.ST_LINK], st[L.ST_PENDING], st[L.ST_US]
    n, d = cfg[L.C_STOPS], direction_nb(cfg, stop, dst)  # the direction never changes on the way
    # Read once: the stores below may alias cfg as far as the compiler knows, so it would reload them.
    hop, chain, hold = cfg[L.C_HOP], cfg[L.C_CHAIN], cfg[L.C_SEND_HOLD] if role == L.ROLE_SEND else 1
    step = 1 if d == 0 else n - 1
    pending[U(2 * stop + d)] -= 1
    now = t
    wait = 0
    while True:
        lk = U(2 * stop + d)
        depart = max(t, link[lk, L.L_FREE])
        link[lk, L.L_FREE] = depart + hold
        link[lk, L.L_STICKS] += 1
        link[lk, L.L_WAIT] += depart - t
        wait += depart - t
        stop, t = stop + step, depart + hop
        if stop >= n:
            stop -= n
        pk = U(2 * stop + d)
        if (stop == dst or not chain or pending[pk] > 0
                or t >= _injection_horizon_nb(st, stop, now)):
            us[U(u), L.S_STALL_LINK] += wait
            if stop != dst:
                pending[pk] += 1
            kind = L.EV_LAND if stop == dst and role == L.ROLE_READ and us[U(u), L.U_CORE] >= 0 else L.EV_STICK
            return push_tail_nb(st[L.ST_EV], st[L.ST_QA], t, kind, stop, dst, u, role, x)
        if role == L.ROLE_MCAST and (st[L.ST_INS][U(x), L.I_A3] >> stop) & 1:  # written here at t, goes on
            if not at_nb(st, t, L.EV_STICK, stop, dst, u, L.ROLE_LAND, x):
                us[U(u), L.S_STALL_LINK] += wait
                return False
