"""The jitted discrete-event loop: pop the earliest (cycle, seq) event, dispatch on its kind.

Units (per core: load, store, send DMA; per corelet: LX->FIFO, FIFO->LX, PT, SFU; the
host's PCIe unit) run their instruction streams in order. An instruction starts when
every token it waits on has been signalled (each wait consumes one signal); it ends
when its last stick has landed, and then signals its tokens. Nothing ticks: time jumps
from event to event. ``st`` is the tuple of state arrays built by ``pack``.

Timing contracts of the units:
- PT pass and SFU op on LX operands: a fixed duration computed by ``pack``.
- LX<->FIFO movers and SFU ops on FIFOs: one stick per step; a step needs a visible
  stick in its source FIFO and a free slot in its destination FIFO (reserved at the
  step, visible ``step`` cycles later; SFU adds its pipeline latency).
- DMA: bursts of at most ``max_burst_bytes`` that do not cross a burst boundary, split
  at channel interleave boundaries; at most ``max_inflight_bytes`` outstanding. Reads:
  request to the memory controller (hop latency per hop, no link use), DRAM service,
  sticks back over the ring, one LX write per port cycle; the load ends the cycle after
  its last write. Writes: sticks leave the LX port one per cycle, cross the ring to the
  controller, the DRAM write starts when a chunk's sticks are all there; the store ends
  when its last write's data is in DRAM. Sends: sticks leave one per cycle, cross the
  ring and are written by the receiving core's ring port one per cycle.
"""

from numba import njit

from .dram import channel_of_nb, enqueue_nb, pick_nb, serve_nb
from .layout import (
    BLOCK_DATA,
    BLOCK_NONE,
    BLOCK_ROOM,
    C_BURST,
    C_FIFO_DEPTH,
    C_HOP,
    C_INFLIGHT,
    C_INTERLEAVE,
    C_MAX_CYCLES,
    C_RL,
    C_STICK_CYC,
    C_WL,
    D_ARMED,
    D_CMD,
    D_QHEAD_R,
    D_QHEAD_W,
    E_KIND,
    E_P0,
    E_P1,
    E_P2,
    E_P3,
    E_P4,
    E_TIME,
    EV_CHANNEL,
    EV_DONE,
    EV_DRAM,
    EV_FIFO_VIS,
    EV_STEP,
    EV_STICK,
    EV_TRY,
    EV_WRITE_ACK,
    F_OCC,
    F_VIS,
    F_WDATA,
    F_WROOM,
    FP_ONE,
    I_A0,
    I_A1,
    I_A2,
    I_A3,
    I_A4,
    I_A5,
    I_A6,
    I_DUR,
    I_OP,
    I_S0,
    I_S1,
    I_W0,
    I_W1,
    K_ADDR,
    K_LEFT,
    K_STICKS,
    K_UNIT,
    OP_D2H,
    OP_FIFO2LX,
    OP_LOAD,
    OP_LX2FIFO,
    OP_MATMUL,
    OP_SEND,
    OP_SFU,
    ROLE_READ,
    ROLE_SEND,
    ROLE_WRITE,
    S_BUSY,
    S_STALL_DRAM,
    S_STALL_FIFO,
    S_STALL_LINK,
    S_STALL_TOKEN,
    S_STICKS,
    STATUS_DEADLOCK,
    STATUS_DONE,
    STATUS_MAX_CYCLES,
    STATUS_QUEUE_FULL,
    U_ADDR,
    U_BLOCK,
    U_BLOCKSINCE,
    U_BUSY,
    U_CHUNK,
    U_CORELET,
    U_DEST,
    U_END,
    U_INFLIGHT,
    U_INTERVAL_FP,
    U_ISSUE_LEFT,
    U_LEFT,
    U_PC,
    U_PORT_FP,
    U_STOP,
    U_WAITSINCE,
    U_WAITTOK,
)
from .queue import pop_nb, push_nb
from .ring import cross_nb, hops_nb

STICK = 128


@njit(cache=True, _nrt=False)
def _at_nb(st, t, kind, p0, p1=0, p2=0, p3=0, p4=0):
    return push_nb(st[12], st[13], t, kind, p0, p1, p2, p3, p4)


@njit(cache=True, _nrt=False)
def _port_nb(port, index, interval, t):
    """Next cycle a port (fixed-point next-free time) accepts a stick at or after ``t``."""
    free_fp = max(port[index], t * FP_ONE)
    port[index] = free_fp + interval
    return (free_fp + FP_ONE - 1) // FP_ONE


@njit(cache=True, _nrt=False)
def _try_start_nb(st, u, t):
    ins, toks, us, tok = st[0], st[1], st[2], st[3]
    if us[u, U_BUSY] == 1 or us[u, U_PC] >= us[u, U_END]:
        return True
    i = us[u, U_PC]
    for w in range(ins[i, I_W0], ins[i, I_W1]):
        if tok[toks[w]] < 1:
            us[u, U_WAITTOK] = toks[w]
            if us[u, U_WAITSINCE] < 0:
                us[u, U_WAITSINCE] = t
            return True
    for w in range(ins[i, I_W0], ins[i, I_W1]):
        tok[toks[w]] -= 1
    if us[u, U_WAITSINCE] >= 0:
        us[u, S_STALL_TOKEN] += t - us[u, U_WAITSINCE]
        us[u, U_WAITSINCE] = -1
    us[u, U_WAITTOK] = -1
    us[u, U_BUSY] = 1
    st[14][0, i] = t
    op = ins[i, I_OP]
    if op == OP_MATMUL or (op == OP_SFU and ins[i, I_A1] == 0 and ins[i, I_A3] == 0):
        return _at_nb(st, t + ins[i, I_DUR], EV_DONE, u)
    if op == OP_LX2FIFO or op == OP_FIFO2LX or op == OP_SFU:
        us[u, U_LEFT] = ins[i, I_A4]
        return _at_nb(st, t, EV_STEP, u)
    us[u, U_ADDR] = ins[i, I_A0]
    us[u, U_ISSUE_LEFT] = ins[i, I_A2]
    us[u, U_INFLIGHT] = 0
    us[u, U_LEFT] = ins[i, I_A2] // STICK
    us[u, U_DEST] = ins[i, I_A3] if op == OP_SEND else us[u, U_STOP]
    return _issue_nb(st, u, t + ins[i, I_DUR])


@njit(cache=True, _nrt=False)
def _issue_nb(st, u, t):
    """Issue the DMA's next bursts while its in-flight budget allows."""
    ins, us, cfg, chunk, chan_stop = st[0], st[2], st[4], st[9], st[10]
    op = ins[us[u, U_PC], I_OP]
    ok = True
    while us[u, U_ISSUE_LEFT] > 0:
        addr = us[u, U_ADDR]
        burst = min(us[u, U_ISSUE_LEFT], cfg[C_BURST] - addr % cfg[C_BURST])
        if us[u, U_INFLIGHT] + burst > cfg[C_INFLIGHT]:
            break
        us[u, U_INFLIGHT] += burst
        us[u, U_ISSUE_LEFT] -= burst
        us[u, U_ADDR] += burst
        if op == OP_SEND:
            for _ in range(burst // STICK):
                d = _port_nb(us[:, U_PORT_FP], u, us[u, U_INTERVAL_FP], t)
                ok &= _at_nb(st, d, EV_STICK, us[u, U_STOP], us[u, U_DEST], u, ROLE_SEND, ins[us[u, U_PC], I_A1])
            continue
        a = addr
        while a < addr + burst:
            n = min(addr + burst - a, cfg[C_INTERLEAVE] - a % cfg[C_INTERLEAVE]) // STICK
            mc = chan_stop[channel_of_nb(cfg, a)]
            slots = cfg[C_INFLIGHT] // STICK
            k = u * slots + us[u, U_CHUNK] % slots
            us[u, U_CHUNK] += 1
            chunk[k, K_ADDR] = a
            chunk[k, K_STICKS] = n
            chunk[k, K_UNIT] = u
            if op == OP_LOAD or op == OP_D2H:
                chunk[k, K_LEFT] = 0
                ok &= _at_nb(st, t + hops_nb(cfg, us[u, U_STOP], mc) * cfg[C_HOP], EV_DRAM, k)
            else:
                chunk[k, K_LEFT] = n
                for _ in range(n):
                    d = _port_nb(us[:, U_PORT_FP], u, us[u, U_INTERVAL_FP], t)
                    ok &= _at_nb(st, d, EV_STICK, us[u, U_STOP], mc, u, ROLE_WRITE, k)
            a += n * STICK
    return ok


@njit(cache=True, _nrt=False)
def _finish_nb(st, u, t):
    """End the unit's current instruction: record, signal its tokens, start the next."""
    ins, toks, us, tok, order = st[0], st[1], st[2], st[3], st[15]
    i = us[u, U_PC]
    st[14][1, i] = t
    order[i] = order[-1]
    order[-1] += 1
    us[u, S_BUSY] += t - st[14][0, i]
    us[u, U_BUSY] = 0
    us[u, U_PC] += 1
    ok = True
    for s in range(ins[i, I_S0], ins[i, I_S1]):
        k = toks[s]
        tok[k] += 1
        for w in range(us.shape[0]):
            if us[w, U_WAITTOK] == k:
                us[w, U_WAITTOK] = -1
                ok &= _at_nb(st, t, EV_TRY, w)
    return ok and _try_start_nb(st, u, t)


@njit(cache=True, _nrt=False)
def _delivered_nb(st, u, sticks, done_at, t):
    us = st[2]
    us[u, U_INFLIGHT] -= sticks * STICK
    us[u, U_LEFT] -= sticks
    us[u, S_STICKS] += sticks
    if us[u, U_LEFT] == 0:
        return _at_nb(st, done_at, EV_DONE, u)
    return _issue_nb(st, u, t)


@njit(cache=True, _nrt=False)
def _request_nb(st, k, is_write, t):
    """A DRAM request reaches its controller's queue."""
    cfg, ch, chunk = st[4], st[5], st[9]
    if enqueue_nb(cfg, ch, chunk, k, is_write):
        c = channel_of_nb(cfg, chunk[k, K_ADDR])
        return _at_nb(st, max(t, ch[c, D_CMD]), EV_CHANNEL, c)
    return True


@njit(cache=True, _nrt=False)
def _channel_nb(st, c, t):
    """The channel picks and serves its next request, then re-arms if more wait."""
    us, cfg, ch, bank, chunk, chan_stop = st[2], st[4], st[5], st[6], st[9], st[10]
    ch[c, D_ARMED] = 0
    k, is_write = pick_nb(ch, chunk, c)
    if k < 0:
        return True
    u, sticks = chunk[k, K_UNIT], chunk[k, K_STICKS]
    data = serve_nb(cfg, ch, bank, chunk[k, K_ADDR], sticks, is_write, t)
    us[u, S_STALL_DRAM] += data - t - (cfg[C_WL] if is_write else cfg[C_RL])
    ok = True
    if is_write:
        ok = _at_nb(st, data + sticks * cfg[C_STICK_CYC], EV_WRITE_ACK, u, sticks)
    else:
        for s in range(sticks):
            ok &= _at_nb(st, data + (s + 1) * cfg[C_STICK_CYC], EV_STICK, chan_stop[c], us[u, U_STOP], u,
                         ROLE_READ, 0)
    if ch[c, D_QHEAD_R] >= 0 or ch[c, D_QHEAD_W] >= 0:
        ch[c, D_ARMED] = 1
        ok &= _at_nb(st, max(t, ch[c, D_CMD]), EV_CHANNEL, c)
    return ok


@njit(cache=True, _nrt=False)
def _stick_nb(st, stop, dst, u, role, x, t):
    us, cfg, link, chunk, rx_port = st[2], st[4], st[8], st[9], st[11]
    if stop != dst:
        nxt, arrive, wait = cross_nb(cfg, link, stop, dst, t)
        us[u, S_STALL_LINK] += wait
        return _at_nb(st, arrive, EV_STICK, nxt, dst, u, role, x)
    if role == ROLE_WRITE:
        chunk[x, K_LEFT] -= 1
        if chunk[x, K_LEFT] > 0:
            return True
        return _request_nb(st, x, 1, t)
    if role == ROLE_READ:
        w = _port_nb(us[:, U_PORT_FP], u, us[u, U_INTERVAL_FP], t)
    else:
        w = _port_nb(rx_port, x, FP_ONE, t)
    return _delivered_nb(st, u, 1, w + 1, t)


@njit(cache=True, _nrt=False)
def _step_nb(st, u, t):
    """One stick of a FIFO-streaming instruction (LX->FIFO, FIFO->LX, SFU on FIFOs)."""
    ins, us, cfg, fifo, t_mark = st[0], st[2], st[4], st[7], st[14][2]
    i = us[u, U_PC]
    op = ins[i, I_OP]
    fin, fout = 2 * us[u, U_CORELET], 2 * us[u, U_CORELET] + 1
    if op == OP_LX2FIFO:
        src, dst, step, visible = -1, fin, 1, 1
    elif op == OP_FIFO2LX:
        src, dst, step, visible = fout, -1, 1, 1
    else:
        src = fin if ins[i, I_A1] else -1
        dst = fout if ins[i, I_A3] else -1
        step, visible = ins[i, I_A5], ins[i, I_A5] + ins[i, I_A6]
    if src >= 0 and fifo[src, F_VIS] == 0:
        _block_nb(us, u, BLOCK_DATA, t)
        fifo[src, F_WDATA] = u
        return True
    if dst >= 0 and fifo[dst, F_OCC] >= cfg[C_FIFO_DEPTH]:
        _block_nb(us, u, BLOCK_ROOM, t)
        fifo[dst, F_WROOM] = u
        return True
    if us[u, U_BLOCK] != BLOCK_NONE:
        us[u, S_STALL_FIFO] += t - us[u, U_BLOCKSINCE]
        us[u, U_BLOCK] = BLOCK_NONE
    ok = True
    if src >= 0:
        fifo[src, F_VIS] -= 1
        fifo[src, F_OCC] -= 1
        if fifo[src, F_WROOM] >= 0:
            ok &= _at_nb(st, t, EV_STEP, fifo[src, F_WROOM])
            fifo[src, F_WROOM] = -1
    if dst >= 0:
        fifo[dst, F_OCC] += 1
        ok &= _at_nb(st, t + visible, EV_FIFO_VIS, dst)
        if t_mark[i] < 0:
            t_mark[i] = t
    us[u, S_STICKS] += 1
    us[u, U_LEFT] -= 1
    if us[u, U_LEFT] == 0:
        return ok and _at_nb(st, t + visible, EV_DONE, u)
    return ok and _at_nb(st, t + step, EV_STEP, u)


@njit(cache=True, _nrt=False)
def _block_nb(us, u, reason, t):
    if us[u, U_BLOCK] == BLOCK_NONE:
        us[u, U_BLOCKSINCE] = t
    us[u, U_BLOCK] = reason


@njit(cache=True, _nrt=False)
def _fifo_visible_nb(st, f, t):
    fifo = st[7]
    fifo[f, F_VIS] += 1
    if fifo[f, F_WDATA] >= 0:
        w = fifo[f, F_WDATA]
        fifo[f, F_WDATA] = -1
        return _at_nb(st, t, EV_STEP, w)
    return True


@njit(cache=True, _nrt=False)
def run_nb(st):
    """Run to completion; return (status, cycle of the last event)."""
    us, cfg, ev, qa = st[2], st[4], st[12], st[13]
    for u in range(us.shape[0]):
        if not _at_nb(st, 0, EV_TRY, u):
            return STATUS_QUEUE_FULL, 0
    now = 0
    while True:
        slot = pop_nb(ev, qa)
        if slot < 0:
            break
        t, kind = ev[slot, E_TIME], ev[slot, E_KIND]
        p0, p1, p2, p3, p4 = ev[slot, E_P0], ev[slot, E_P1], ev[slot, E_P2], ev[slot, E_P3], ev[slot, E_P4]
        if t > cfg[C_MAX_CYCLES]:
            return STATUS_MAX_CYCLES, t
        now = t
        if kind == EV_STICK:
            ok = _stick_nb(st, p0, p1, p2, p3, p4, t)
        elif kind == EV_DRAM:
            ok = _request_nb(st, p0, 0, t)
        elif kind == EV_CHANNEL:
            ok = _channel_nb(st, p0, t)
        elif kind == EV_WRITE_ACK:
            ok = _delivered_nb(st, p0, p1, t, t)
        elif kind == EV_STEP:
            ok = _step_nb(st, p0, t)
        elif kind == EV_FIFO_VIS:
            ok = _fifo_visible_nb(st, p0, t)
        elif kind == EV_DONE:
            ok = _finish_nb(st, p0, t)
        else:
            ok = _try_start_nb(st, p0, t)
        if not ok:
            return STATUS_QUEUE_FULL, now
    for u in range(us.shape[0]):
        if us[u, U_PC] < us[u, U_END]:
            return STATUS_DEADLOCK, now
    return STATUS_DONE, now
