"""FIFO streaming: LX->FIFO and FIFO->LX movers and SFU ops on FIFOs, one stick per step.

Timing contract: a step needs a visible stick in its source FIFO and a free slot in its
destination FIFO; the slot is reserved at the step and the stick becomes visible ``step``
cycles later (SFU: plus its pipeline latency). Movers step once per cycle, the SFU once per
its cost class. A blocked unit is woken by the pop or the visibility it waits for.
The handlers take only the arrays they use, not the state tuple (see loop.py: the cost of a call).
"""


from . import layout as L
from .jit import U, njit
from .queue import push_nb


@njit(cache=True, _nrt=False)
def step_nb(ins, us, cfg, fifo, times, ev, qa, u, t):
    """One stick of a FIFO-streaming instruction (LX->FIFO, FIFO->LX, SFU on FIFOs)."""
    unit = us[U(u)]
    i = unit[L.U_PC]
    instr = ins[U(i)]
    op = instr[L.I_OP]
    fin, fout = 2 * unit[L.U_CORELET], 2 * unit[L.U_CORELET] + 1
    if op == L.OP_LX2FIFO:
        src, dst, step, visible = -1, fin, 1, 1
    elif op == L.OP_FIFO2LX:
        src, dst, step, visible = fout, -1, 1, 1
    else:
        src = fin if instr[L.I_A1] else -1
        dst = fout if instr[L.I_A3] else -1
        step, visible = instr[L.I_A5], instr[L.I_A5] + instr[L.I_A6]
    if src >= 0 and fifo[U(src), L.F_VIS] == 0:
        _block_nb(us, times, u, L.BLOCK_DATA, t)
        fifo[U(src), L.F_WDATA] = u
        return True
    if dst >= 0 and fifo[U(dst), L.F_OCC] >= cfg[L.C_FIFO_DEPTH]:
        _block_nb(us, times, u, L.BLOCK_ROOM, t)
        fifo[U(dst), L.F_WROOM] = u
        return True
    _unblock_nb(us, times, u, t)
    ok = True
    if src >= 0:
        source = fifo[U(src)]
        source[L.F_VIS] -= 1
        source[L.F_OCC] -= 1
        if source[L.F_WROOM] >= 0:
            ok &= push_nb(ev, qa, t, L.EV_STEP, source[L.F_WROOM])
            source[L.F_WROOM] = -1
    if dst >= 0:
        fifo[U(dst), L.F_OCC] += 1
        ok &= push_nb(ev, qa, t + visible, L.EV_FIFO_VIS, dst)
        if times[L.T_FIRST_PUSH, U(i)] < 0:
            times[L.T_FIRST_PUSH, U(i)] = t
    unit[L.S_STICKS] += 1
    unit[L.U_LEFT] -= 1
    if unit[L.U_LEFT] == 0:
        return ok and push_nb(ev, qa, t + visible, L.EV_DONE, u)
    return ok and push_nb(ev, qa, t + step, L.EV_STEP, u)


@njit(cache=True, _nrt=False)
def _block_nb(us, times, u, reason, t):
    unit = us[U(u)]
    if unit[L.U_BLOCK] != reason:
        _unblock_nb(us, times, u, t)
        unit[L.U_BLOCKSINCE] = t
        unit[L.U_BLOCK] = reason


@njit(cache=True, _nrt=False, forceinline=True)
def _unblock_nb(us, times, u, t):
    """Charge the cycles since the unit blocked to its cause, on the unit and on its current
    instruction (reports split stalls by kernel); busy excludes them."""
    unit = us[U(u)]
    if unit[L.U_BLOCK] == L.BLOCK_NONE:
        return
    stalled = t - unit[L.U_BLOCKSINCE]
    data = unit[L.U_BLOCK] == L.BLOCK_DATA
    unit[L.S_STALL_DATA if data else L.S_STALL_ROOM] += stalled
    times[L.T_STALL_DATA if data else L.T_STALL_ROOM, unit[L.U_PC]] += stalled
    unit[L.S_BUSY] -= stalled
    unit[L.U_BLOCK] = L.BLOCK_NONE


@njit(cache=True, _nrt=False)
def fifo_visible_nb(fifo, ev, qa, f, t):
    row = fifo[U(f)]
    row[L.F_VIS] += 1
    if row[L.F_WDATA] >= 0:
        w = row[L.F_WDATA]
        row[L.F_WDATA] = -1
        return push_nb(ev, qa, t, L.EV_STEP, w)
    return True
