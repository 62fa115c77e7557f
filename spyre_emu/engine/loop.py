"""The jitted discrete-event loop: pop the next event in canonical order, dispatch on its kind.

Units (per core: load, store, send DMA; per corelet: LX->FIFO, FIFO->LX, PT, SFU; the
host's PCIe unit) run their instruction streams in order. An instruction starts when
every token it waits on has been signalled (each wait consumes one signal); it ends
when its last stick has landed, and then signals its tokens. Nothing ticks: time jumps
from event to event. ``st`` is the tuple of state arrays built by ``pack``.
PT passes and SFU ops on LX operands take the fixed duration ``pack`` computed;
DMA timing is in dma.py, FIFO streaming in fifo.py. A DMA unit starts its next instruction once the
current one has issued its last request (descriptors queue, sharing the in-flight budget) and ends
its instructions in order. A read request reaching its memory controller is no event: it is queued in
its channel at issue, stamped with its arrival, and the channel picks only reads that have arrived
(dram.py; an ``EV_CHANNEL`` carries the channel's arm number, and one superseded by an earlier pick does
nothing: docs/speed.md, session 42).

The functions on every stick's path (``stick_nb``, ``travel_nb``, ``delivered_nb``) and a channel's
pick (``channel_nb``, once per served request) are inlined into the loop: a call to a jitted function
passes the state tuple as about 150 scalars (18 arrays, each a pointer, sizes and strides), which
cost more than the work of a multicast copy's landing. Inlining the rest as well (issue, the other
DRAM and the FIFO handlers) was tried: its first compile ran over three CPU minutes without finishing.
So those handlers stay calls but take only the arrays they use, and so do
an instruction's end and start below (twice per instruction: on a program of short PT passes, passing
the tuple was most of the loop's time); only a DMA instruction's start gets the tuple.

Inlining (docs/speed.md, session 40): every helper is compiled once and inlined by LLVM
(``forceinline=True``), so no numba IR is copied (copying the larger ones' IR, already grown by their own
inlined callees, into the loop took about half of a cold compile: numba deep-copies the whole IR scope once
per block). Each takes the same argument types at every call site, or numba compiles a version per
signature: no bare ``0`` or ``1`` argument (a ``Literal[int]``), no omitted default. Three tiny functions stay
copied into their call sites in numba's IR (``inline="always"``): ``push_nb`` / ``at_nb``, which make every
payload an ``int64`` (their callers pass literals and omit trailing zeros) before calling ``_push_nb``,
and ``_port_nb``, called with a column view and with a contiguous array.
"""


from . import layout as L
from .dma import channel_nb, delivered_nb, issue_nb, start_dma_nb, stick_nb
from .fifo import fifo_visible_nb, step_nb
from .jit import U, njit
from .queue import at_nb, pop_nb, push_nb


@njit(cache=True, _nrt=False, forceinline=True)
def _try_start_nb(ins, toks, us, tok, times, ev, qa, u, t):
    """Start the unit's next instruction if its tokens are there; (False if the event table is full, the
    DMA instruction the caller must start with ``start_dma_nb`` or -1). Only the arrays it uses are
    passed, not the state tuple: this runs twice per instruction."""
    unit = us[U(u)]
    if unit[L.U_BUSY] == 1 or unit[L.U_PC] >= unit[L.U_END]:
        return True, -1
    i = unit[L.U_PC]
    instr = ins[U(i)]
    for w in range(instr[L.I_W0], instr[L.I_W1]):
        if tok[toks[w]] < 1:
            unit[L.U_WAITTOK] = toks[w]
            if unit[L.U_WAITSINCE] < 0:
                unit[L.U_WAITSINCE] = t
            return True, -1
    for w in range(instr[L.I_W0], instr[L.I_W1]):
        tok[toks[w]] -= 1
    if unit[L.U_WAITSINCE] >= 0:
        unit[L.S_STALL_TOKEN] += t - unit[L.U_WAITSINCE]
        unit[L.U_WAITSINCE] = -1
    unit[L.U_WAITTOK] = -1
    unit[L.U_BUSY] = 1
    times[L.T_START, U(i)] = t
    op = instr[L.I_OP]
    if op == L.OP_MATMUL or (op == L.OP_SFU and instr[L.I_A1] == 0 and instr[L.I_A3] == 0):
        return push_nb(ev, qa, t + instr[L.I_DUR], L.EV_DONE, u), -1
    if op == L.OP_LX2FIFO or op == L.OP_FIFO2LX or op == L.OP_SFU:
        unit[L.U_LEFT] = instr[L.I_A4]
        return push_nb(ev, qa, t, L.EV_STEP, u), -1
    return True, i


@njit(cache=True, _nrt=False)
def _finish_nb(ins, toks, us, tok, times, order, writes, ev, qa, u, t):
    """End the unit's oldest instruction: record, signal its tokens. A DMA unit then ends its next one
    too if that one is already delivered (in order; it started when this one was issued); any other
    unit starts its next instruction. Returns what ``_try_start_nb`` returns."""
    unit = us[U(u)]
    i = unit[L.U_OLDEST]
    instr = ins[U(i)]
    times[L.T_END, U(i)] = t
    order[U(i)] = order[-1]
    order[-1] += 1
    unit[L.S_BUSY] += t - max(times[L.T_START, U(i)], unit[L.U_LASTEND])
    unit[L.U_LASTEND] = t
    unit[L.U_OLDEST] += 1
    ok = instr[L.I_S0] == instr[L.I_S1] or _signal_nb(ins, toks, us, tok, ev, qa, i, t)
    op = instr[L.I_OP]
    if op == L.OP_STORE:
        writes[L.W_STORES] -= 1
        writes[L.W_STORES_STARTED] -= 1
    elif op == L.OP_H2D:
        writes[L.W_H2D] -= 1
    if op <= L.OP_SEND or op >= L.OP_H2D:
        j = unit[L.U_OLDEST]
        if j < unit[L.U_PC] and times[L.T_LEFT, U(j)] == 0:
            ok &= push_nb(ev, qa, max(t, times[L.T_READY, U(j)]), L.EV_DONE, u)
        return ok, -1
    unit[L.U_BUSY] = 0
    unit[L.U_PC] += 1
    if not ok:
        return False, -1
    return _try_start_nb(ins, toks, us, tok, times, ev, qa, u, t)


@njit(cache=True, _nrt=False)
def _signal_nb(ins, toks, us, tok, ev, qa, i, t):
    """Instruction ``i`` ended at ``t``: count up its tokens and wake the units waiting on them."""
    ok = True
    for s in range(ins[U(i), L.I_S0], ins[U(i), L.I_S1]):
        k = toks[s]
        tok[k] += 1
        for w in range(us.shape[0]):
            if us[U(w), L.U_WAITTOK] == k:
                us[U(w), L.U_WAITTOK] = -1
                ok &= push_nb(ev, qa, t, L.EV_TRY, w)
    return ok


@njit(cache=True, _nrt=False)
def start_nb(st):
    """Every unit tries its first instruction at cycle 0; False if the event table is full."""
    for u in range(st[L.ST_US].shape[0]):
        if not at_nb(st, 0, L.EV_TRY, u):
            return False
    return True


@njit(cache=True, _nrt=False)
def run_nb(st, now, budget):
    """Handle at most ``budget`` events after cycle ``now``; return (status, cycle of the last event).

    STATUS_RUNNING means the budget ran out: all state is in ``st``, so calling again with the
    returned cycle resumes exactly where it stopped (the caller reports progress in between).
    """
    ins, us, cfg, ch, bank, fifo = st[L.ST_INS], st[L.ST_US], st[L.ST_CFG], st[L.ST_CH], st[L.ST_BANK], st[L.ST_FIFO]
    chunk, chan_stop, ev, qa, times, pending = (st[L.ST_CHUNK], st[L.ST_CHAN_STOP], st[L.ST_EV], st[L.ST_QA],
                                                st[L.ST_TIMES], st[L.ST_PENDING])
    toks, tok, order, writes = st[L.ST_TOKS], st[L.ST_TOK], st[L.ST_ORDER], st[L.ST_WRITES]
    for _ in range(budget):
        slot = pop_nb(ev, qa)
        if slot < 0:
            for u in range(us.shape[0]):
                if us[U(u), L.U_OLDEST] < us[U(u), L.U_END]:
                    return L.STATUS_DEADLOCK, now
            return L.STATUS_DONE, now
        row = ev[U(slot)]
        t, kind = row[L.E_TIME], row[L.E_KIND]
        p0, p1, p2, p3, p4 = row[L.E_P0], row[L.E_P1], row[L.E_P2], row[L.E_P3], row[L.E_P4]
        if t > cfg[L.C_MAX_CYCLES]:
            return L.STATUS_MAX_CYCLES, t
        now = t
        if kind == L.EV_STICK or kind == L.EV_LAND:
            ok = stick_nb(st, p0, p1, p2, p3, p4, t)
        elif kind == L.EV_CHANNEL:
            ok = channel_nb(ins, us, cfg, ch, bank, chunk, chan_stop, pending, writes, ev, qa, p0, p1, t)
        elif kind == L.EV_WRITE_ACK:
            ok = delivered_nb(st, p0, p2, p1, t, t)
        elif kind == L.EV_STEP:
            ok = step_nb(ins, us, cfg, fifo, times, ev, qa, p0, t)
        elif kind == L.EV_FIFO_VIS:
            ok = fifo_visible_nb(fifo, ev, qa, p0, t)
        elif kind == L.EV_DONE:
            ok, dma = _finish_nb(ins, toks, us, tok, times, order, writes, ev, qa, p0, t)
            if dma >= 0:
                ok = start_dma_nb(st, p0, dma, t)
        elif kind == L.EV_ISSUE:
            ok = issue_nb(ins, us, cfg, ch, chunk, chan_stop, pending, ev, qa, p0, t)
        else:
            ok, dma = _try_start_nb(ins, toks, us, tok, times, ev, qa, p0, t)
            if dma >= 0:
                ok = start_dma_nb(st, p0, dma, t)
        if not ok:
            return L.STATUS_QUEUE_FULL, now
    return L.STATUS_RUNNING, now
