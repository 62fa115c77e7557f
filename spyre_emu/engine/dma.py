"""DMA units (load, store, send, PCIe): bursts, the in-flight budget, sticks on the ring, DRAM queues.

Timing contract: a load, store or send unit sets up each piece of a transfer (the whole of a plain
one, each run of a strided one) for ``piece_setup_cycles``, from the instruction's start or from the
issue of the previous piece's last request, and issues none of its requests before; bursts of at
most ``max_burst_bytes`` that do not cross a burst boundary (nor the end of a piece of a strided load
or store), split at channel interleave boundaries into requests;
at most ``max_inflight_bytes`` outstanding per unit, over all its instructions under way (a unit
starts its next instruction once the current one has issued its last request, and ends them in
order). Reads: the request reaches its memory controller after one hop latency per hop (requests
use no link; queued at issue, stamped with that cycle), waits in the channel's queue, and each stick
leaves the controller when its data is out, crosses the ring and is written by the unit's LX port
one per port cycle; the load ends the cycle after its last write. A multicast load (``to``: several
cores, one DRAM read) sends each stick out of the controller once per ring direction that has
destinations; the copy is written by each
destination's ring receive port (one per cycle) as it passes and ends at the farthest; every
``copies`` copies delivered free one stick of budget. Writes: sticks leave the LX port one per port
cycle, cross the ring, and a request joins the channel's write queue when its sticks are all at the
controller; the store ends when its last write's data is in DRAM. Sends: sticks leave one per
cycle, cross the ring and are written by the receiving core's ring port one per cycle. The PCIe unit
is a DMA unit whose port moves a stick every ~2.3 cycles (``pcie_interval_fp``), after a fixed
latency.
"""


from . import layout as L
from .dram import channel_of_nb, pick_nb, queue_read_nb, queue_write_nb, serve_nb
from .jit import U, njit
from .queue import WINDOW, at_nb, push_nb
from .ring import hops_nb, legs_nb, stick_at_nb, travel_nb

STICK = 128
SERVE_AHEAD = WINDOW // 4  # cycles a channel may serve ahead (channel_nb): 1,024


@njit(cache=True, _nrt=False)
def start_dma_nb(st, u, i, t):
    """Start DMA instruction ``i`` on unit ``u``; PCIe transfers first wait their latency."""
    ins, us = st[L.ST_INS], st[L.ST_US]
    unit, instr = us[U(u)], ins[U(i)]
    unit[L.U_ADDR] = instr[L.I_A0]
    unit[L.U_ISSUE_LEFT] = instr[L.I_A2]
    unit[L.U_PIECE_LEFT] = instr[L.I_A5]
    if instr[L.I_OP] <= L.OP_SEND:  # load, store, send: the first piece is set up
        unit[L.U_PIECE_AT] = t + st[L.ST_CFG][L.C_PIECE_SETUP]
    if instr[L.I_OP] == L.OP_STORE:
        st[L.ST_WRITES][L.W_STORES_STARTED] += 1
    st[L.ST_TIMES][L.T_LEFT, i] = instr[L.I_A2] // STICK * _copies_nb(ins, i)
    unit[L.U_DEST] = instr[L.I_A3] if instr[L.I_OP] == L.OP_SEND else unit[L.U_STOP]
    return issue_nb(ins, us, st[L.ST_CFG], st[L.ST_CH], st[L.ST_CHUNK], st[L.ST_CHAN_STOP], st[L.ST_PENDING],
                    st[L.ST_EV], st[L.ST_QA], u, t + instr[L.I_DUR])


@njit(cache=True, _nrt=False, forceinline=True)
def _copies_nb(ins, i):
    """Copies of each stick a DMA instruction delivers: its multicast destinations, else one."""
    return max(1, ins[U(i), L.I_A4]) if ins[U(i), L.I_OP] == L.OP_LOAD else 1


@njit(cache=True, _nrt=False, inline="always")
def _port_nb(port, index, interval, t):
    """Next cycle a port (fixed-point next-free time) accepts a stick at or after ``t``."""
    free_fp = max(port[U(index)], t * L.FP_ONE)
    port[U(index)] = free_fp + interval
    return (free_fp + L.FP_ONE - 1) // L.FP_ONE


@njit(cache=True, _nrt=False, forceinline=True)
def _burst_nb(unit, cfg):
    """Bytes of the unit's next burst (``unit``: its row of ``us``): the rest of its piece, up to the next
    burst boundary."""
    return min(unit[L.U_PIECE_LEFT], cfg[L.C_BURST] - (unit[L.U_ADDR] & (cfg[L.C_BURST] - 1)))


@njit(cache=True, _nrt=False, forceinline=True)
def _idle_nb(unit, cfg, t):
    """Whether ``issue_nb`` would neither issue nor schedule anything now (``unit``: its row of ``us``):
    nothing left to issue, a piece still being set up whose wake-up is already scheduled, or no budget
    for the next burst."""
    if unit[L.U_ISSUE_LEFT] == 0:
        return True
    if t < unit[L.U_PIECE_AT]:
        return unit[L.U_WAKE] == unit[L.U_PIECE_AT]
    return unit[L.U_INFLIGHT] + _burst_nb(unit, cfg) > cfg[L.C_INFLIGHT]


@njit(cache=True, _nrt=False)
def issue_nb(ins, us, cfg, ch, chunk, chan_stop, pending, ev, qa, u, t):
    """Issue the DMA's next bursts while its in-flight budget allows. It takes only the arrays it
    uses: a jitted call passes every array as about eight scalars, and the whole state tuple as 150. The unit's
    row is indexed at each access, not taken once as a view like elsewhere (jit.U): here the view made the
    lowered gemm's loop about ×0.985 (docs/speed.md, session 41)."""
    if us[U(u), L.U_ISSUE_LEFT] == 0:  # between instructions
        return True
    i = us[U(u), L.U_PC]
    op = ins[U(i), L.I_OP]
    ok = True
    while us[U(u), L.U_ISSUE_LEFT] > 0:
        if t < us[U(u), L.U_PIECE_AT]:  # the piece is still being set up: issue again when it is
            if us[U(u), L.U_WAKE] != us[U(u), L.U_PIECE_AT]:
                us[U(u), L.U_WAKE] = us[U(u), L.U_PIECE_AT]
                ok &= push_nb(ev, qa, us[U(u), L.U_PIECE_AT], L.EV_ISSUE, u)
            break
        addr = us[U(u), L.U_ADDR]
        burst = _burst_nb(us[U(u)], cfg)
        if us[U(u), L.U_INFLIGHT] + burst > cfg[L.C_INFLIGHT]:
            break
        us[U(u), L.U_INFLIGHT] += burst
        us[U(u), L.U_ISSUE_LEFT] -= burst
        us[U(u), L.U_ADDR] += burst
        us[U(u), L.U_PIECE_LEFT] -= burst
        if us[U(u), L.U_PIECE_LEFT] == 0:  # the next piece of a strided transfer, set up from now
            us[U(u), L.U_ADDR] += ins[U(i), L.I_A6] - ins[U(i), L.I_A5]
            us[U(u), L.U_PIECE_LEFT] = ins[U(i), L.I_A5]
            if op <= L.OP_SEND:
                us[U(u), L.U_PIECE_AT] = t + cfg[L.C_PIECE_SETUP]
        if us[U(u), L.U_ISSUE_LEFT] == 0:  # all issued: the next instruction may start
            us[U(u), L.U_BUSY] = 0
            us[U(u), L.U_PC] += 1
            ok &= push_nb(ev, qa, t, L.EV_TRY, u)
        if op == L.OP_SEND:
            for _ in range(burst // STICK):
                d = _port_nb(us[:, L.U_PORT_FP], u, us[U(u), L.U_INTERVAL_FP], t)
                ok &= stick_at_nb(cfg, pending, ev, qa, d, us[U(u), L.U_STOP], us[U(u), L.U_DEST], u, L.ROLE_SEND, i)
            continue
        a = addr
        while a < addr + burst:
            n = min(addr + burst - a, cfg[L.C_INTERLEAVE] - (a & (cfg[L.C_INTERLEAVE] - 1))) // STICK
            c = channel_of_nb(cfg, a)
            mc = chan_stop[c]
            k = us[U(u), L.U_CHUNK]  # the unit's free request slot freed last (one exists: layout.U_CHUNK)
            us[U(u), L.U_CHUNK] = chunk[U(k), L.K_NEXT] if chunk[U(k), L.K_STICKS] > 0 else k + 1
            chunk[U(k), L.K_ADDR] = a
            chunk[U(k), L.K_STICKS] = n
            chunk[U(k), L.K_UNIT] = u
            chunk[U(k), L.K_INS] = i
            if op == L.OP_LOAD or op == L.OP_D2H:
                chunk[U(k), L.K_LEFT] = 0
                arrive = t + hops_nb(cfg, us[U(u), L.U_STOP], mc) * cfg[L.C_HOP]  # later than t: hops >= 1
                queue_read_nb(ch, chunk, c, k, arrive, t)
                ok &= _arm_nb(ch, ev, qa, c, arrive)
            else:
                chunk[U(k), L.K_LEFT] = n
                for _ in range(n):
                    d = _port_nb(us[:, L.U_PORT_FP], u, us[U(u), L.U_INTERVAL_FP], t)
                    ok &= stick_at_nb(cfg, pending, ev, qa, d, us[U(u), L.U_STOP], mc, u, L.ROLE_WRITE, k)
            a += n * STICK
    return ok


@njit(cache=True, _nrt=False, forceinline=True)
def delivered_nb(st, u, i, sticks, done_at, t):
    """Sticks (or multicast copies) of instruction ``i`` reached their destination: free their budget;
    the last one ends the transfer at ``done_at`` if every earlier one on the unit has ended."""
    ins, us, times = st[L.ST_INS], st[L.ST_US], st[L.ST_TIMES]
    copies, left = _copies_nb(ins, i), times[L.T_LEFT, U(i)]
    times[L.T_LEFT, U(i)] = left - sticks
    if copies == 1:  # spares two divisions by a run-time value (tens of cycles each) per delivery
        freed = sticks
    else:  # sticks whose every copy is now delivered
        total = ins[U(i), L.I_A2] // STICK * copies
        freed = (total - left + sticks) // copies - (total - left) // copies
    unit = us[U(u)]
    unit[L.U_INFLIGHT] -= freed * STICK
    unit[L.S_STICKS] += sticks
    ok = True
    if times[L.T_LEFT, U(i)] == 0:
        times[L.T_READY, U(i)] = done_at
        if i == unit[L.U_OLDEST]:
            ok = at_nb(st, done_at, L.EV_DONE, u)
    if _idle_nb(unit, st[L.ST_CFG], t):  # issue_nb would do nothing: spare the call
        return ok
    return ok and issue_nb(ins, us, st[L.ST_CFG], st[L.ST_CH], st[L.ST_CHUNK], st[L.ST_CHAN_STOP], st[L.ST_PENDING],
                           st[L.ST_EV], st[L.ST_QA], u, t)


@njit(cache=True, _nrt=False)
def write_nb(cfg, ch, chunk, ev, qa, k, t):
    """A write request's last stick reached its controller: it joins the write queue."""
    c = channel_of_nb(cfg, chunk[U(k), L.K_ADDR])
    queue_write_nb(ch, chunk, c, k)
    return _arm_nb(ch, ev, qa, c, t)


@njit(cache=True, _nrt=False, forceinline=True)
def _arm_nb(ch, ev, qa, c, ready):
    """Have channel ``c`` pick at max(``ready``, its next command cycle ``D_CMD``), unless it picks no later
    already: ``ready`` is when a request waits there (a read's arrival, a write's last stick). In the event
    model a request reaching an idle channel armed it for max(arrival, ``D_CMD``). A read arms it at its
    issue, before it arrives: for the earliest max(arrival, ``D_CMD``) of the reads on their way, superseding
    a pick armed for a read that arrives later (that event stays queued and does nothing: its arm number is
    old). A busy channel is never armed earlier: its pick is at the cycle it was armed or at ``D_CMD``, and
    only a served request moves ``D_CMD`` (docs/speed.md, session 42)."""
    chan = ch[U(c)]
    at = max(ready, chan[L.D_CMD])
    if chan[L.D_ARMED] <= at:
        return True
    chan[L.D_ARMED] = at
    chan[L.D_ARMS] += 1
    return push_nb(ev, qa, at, L.EV_CHANNEL, c, chan[L.D_ARMS])


@njit(cache=True, _nrt=False, forceinline=True)
def write_horizon_nb(cfg, writes, t):
    """The earliest cycle at which a write could still join a channel's queue, seen at cycle ``t``: none
    once no store or host-to-device transfer is left; while stores are left but none has started, the next
    starts at ``t`` at the earliest, sets up its first piece and crosses at least one hop (``dma.issue_nb``,
    ``ring._unit_horizon_nb``); else ``t``."""
    if writes[L.W_H2D] > 0 or writes[L.W_STORES_STARTED] > 0:
        return t
    if writes[L.W_STORES] > 0:
        return t + cfg[L.C_PIECE_SETUP] + cfg[L.C_HOP]
    return L.NEVER


@njit(cache=True, _nrt=False, forceinline=True)
def channel_nb(ins, us, cfg, ch, bank, chunk, chan_stop, pending, writes, ev, qa, c, arm, t):
    """The channel picks and serves its next request, then re-arms if more wait; a pick superseded by an
    earlier one (``arm`` not the channel's last) does nothing. Inlined into the loop (by LLVM): called, it
    received its ten arrays as about 80 scalars, once per served request, and took 13 % of the loop's
    samples on a streaming read (docs/speed.md, session 34).

    Serving ahead: the next pick is made in this event, at its own cycle p, when nothing that happens
    before p can change it. A read issued from now on arrives at least a hop after ``t``, behind a head that
    arrives earlier in the queue's order; a write must not be waiting and none can join before p
    (``write_horizon_nb``). The serve touches only the channel, its banks, the read's own counters and its
    request slot; its sticks' departures are events as before (docs/speed.md, session 43). Ahead by at most
    ``SERVE_AHEAD`` cycles, so that their departures mostly stay in the calendar, not its far heap."""
    chan = ch[U(c)]
    if arm != chan[L.D_ARMS]:
        return True
    chan[L.D_ARMED] = L.NEVER
    ahead = t
    if cfg[L.C_SERVE_AHEAD]:
        ahead = min(write_horizon_nb(cfg, writes, t), t + SERVE_AHEAD, cfg[L.C_MAX_CYCLES] + 1)
    ok, p = True, t
    while True:
        k, is_write = pick_nb(ch, chunk, c, p)
        if k < 0:
            return ok
        req = chunk[U(k)]
        u, sticks, i = req[L.K_UNIT], req[L.K_STICKS], req[L.K_INS]
        data = serve_nb(cfg, ch, bank, req[L.K_ADDR], sticks, is_write, p)
        req[L.K_NEXT] = us[U(u), L.U_CHUNK]  # the slot is free again
        us[U(u), L.U_CHUNK] = k
        us[U(u), L.S_STALL_DRAM] += data - p - (cfg[L.C_WL] if is_write else cfg[L.C_RL])
        if is_write:
            ok &= push_nb(ev, qa, data + sticks * cfg[L.C_STICK_CYC], L.EV_WRITE_ACK, u, sticks, i)
        else:
            ok &= _read_out_nb(ins, us, cfg, pending, ev, qa, u, i, chan_stop[U(c)], sticks, data)
        if chan[L.D_QHEAD_W] >= 0:  # a write waits
            ready = p
        elif chan[L.D_QHEAD_R] >= 0:  # the first read, once it has arrived
            arrive = chunk[U(chan[L.D_QHEAD_R]), L.K_ARRIVE]
            ready = max(p, arrive)
            nxt = max(ready, chan[L.D_CMD])
            if arrive < t + cfg[L.C_HOP] and nxt < ahead:
                p = nxt
                continue
        else:
            return ok
        return _arm_nb(ch, ev, qa, c, ready) and ok


@njit(cache=True, _nrt=False, forceinline=True)
def _read_out_nb(ins, us, cfg, pending, ev, qa, u, i, src, sticks, data):
    """A served read's sticks (of instruction ``i``) leave the controller at stop ``src`` one per
    ``stick_cycles``: to the load's core, or a multicast as one copy each way that has destinations,
    bound for the farthest."""
    mask = ins[U(i), L.I_A3] if ins[U(i), L.I_OP] == L.OP_LOAD else 0
    ok = True
    if mask == 0:  # a plain read: spares legs_nb's walk over every stop, once per request
        for s in range(sticks):
            ok &= stick_at_nb(cfg, pending, ev, qa, data + (s + 1) * cfg[L.C_STICK_CYC], src, us[U(u), L.U_STOP], u,
                              L.ROLE_READ, i)
        return ok
    cw, ccw = legs_nb(cfg, src, mask)
    for s in range(sticks):
        leave = data + (s + 1) * cfg[L.C_STICK_CYC]
        for far in (cw, ccw):
            if far >= 0:
                ok &= stick_at_nb(cfg, pending, ev, qa, leave, src, far, u, L.ROLE_MCAST, i)
    return ok


@njit(cache=True, _nrt=False, forceinline=True)
def stick_nb(st, stop, dst, u, role, x, t):
    """A stick reaches ``stop``: travel on, or land (LX port, or a write's memory controller). A
    multicast copy is written by each destination's ring receive port as it passes, then goes on."""
    us, chunk, rx_port, ins = st[L.ST_US], st[L.ST_CHUNK], st[L.ST_RX_PORT], st[L.ST_INS]
    if role == L.ROLE_MCAST or role == L.ROLE_LAND:
        ok = True
        if (ins[U(x), L.I_A3] >> stop) & 1:
            core = us[U(st[L.ST_STOPS][U(stop), L.R_INJ0]), L.U_CORE]
            ok = delivered_nb(st, u, x, L.ONE_STICK, _port_nb(rx_port, core, L.FP_ONE, t) + 1, t)
        if stop != dst and role == L.ROLE_MCAST:
            ok &= travel_nb(st, stop, dst, u, role, x, t)
        return ok
    if stop != dst:
        return travel_nb(st, stop, dst, u, role, x, t)
    if role == L.ROLE_WRITE:
        chunk[U(x), L.K_LEFT] -= 1
        if chunk[U(x), L.K_LEFT] > 0:
            return True
        return write_nb(st[L.ST_CFG], st[L.ST_CH], chunk, st[L.ST_EV], st[L.ST_QA], x, t)
    if role == L.ROLE_READ:
        w = _port_nb(us[:, L.U_PORT_FP], u, us[U(u), L.U_INTERVAL_FP], t)
    else:
        w = _port_nb(rx_port, ins[U(x), L.I_A1], L.FP_ONE, t)
    return delivered_nb(st, u, x, L.ONE_STICK, w + 1, t)
