"""The bidirectional ring: shortest-direction routes and per-link, per-stick arbitration.

Timing contract: a link carries one 128 B stick per cycle per direction. A stick that
reaches a stop at cycle t leaves on its next link at max(t, the cycle after the link's
previous stick) and reaches the next stop ``hop_latency`` cycles later. Sticks contend
first come, first served (ties in event order). Routes take the shorter direction;
equal distances go clockwise (towards higher stop numbers).
"""

from numba import njit

from . import layout as L


@njit(cache=True, _nrt=False, inline="always")
def hops_nb(cfg, src, dst):
    cw = (dst - src) % cfg[L.C_STOPS]
    return min(cw, cfg[L.C_STOPS] - cw)


@njit(cache=True, _nrt=False, inline="always")
def cross_nb(cfg, link, stop, dst, now):
    """Send one stick from ``stop`` towards ``dst``; return (next stop, arrival cycle, wait)."""
    n = cfg[L.C_STOPS]
    cw = (dst - stop) % n
    if cw <= n - cw:
        lk, nxt = 2 * stop, (stop + 1) % n
    else:
        lk, nxt = 2 * stop + 1, (stop - 1) % n
    depart = max(now, link[lk, L.L_FREE])
    link[lk, L.L_FREE] = depart + 1
    link[lk, L.L_STICKS] += 1
    link[lk, L.L_WAIT] += depart - now
    return nxt, depart + cfg[L.C_HOP], depart - now
