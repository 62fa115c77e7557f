"""UnitProgram + Machine -> the struct-of-arrays state tuple the jitted loop runs on.

Fixed durations (PT passes, SFU ops on LX) are computed here, once, from the machine's
[pt] and [sfu] sections; everything that contends (ring, DRAM, FIFOs, ports) is left to
the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..unit_program import HOST_CORE, Instruction, UnitProgram
from ..unit_program import columns as C
from ..unit_program.columns import Columns
from ..unit_program.opcodes import CORE_UNITS, HOST_UNIT, SFU_OPS, Op
from . import layout as L
from . import systolic


@dataclass(frozen=True)
class Packed:
    """The state tuple plus what is needed to read it back."""

    state: tuple
    instructions: Sequence[Instruction]
    unit_names: list[str]
    tokens: list[str]


def unit_names(machine: Machine) -> list[str]:
    return list(_unit_names(machine.cores.count))


@cache
def _unit_names(cores: int) -> tuple[str, ...]:
    return (*(f"core{c}.{u}" for c in range(cores) for u in CORE_UNITS), HOST_UNIT)


def unit_index(machine: Machine, core: int, unit: str) -> int:
    if core == HOST_CORE:
        return machine.cores.count * len(CORE_UNITS)
    return core * len(CORE_UNITS) + CORE_UNITS.index(unit)


def pt_pass_cycles(machine: Machine, rows: int, k: int, dtype: str, cols: int | None = None) -> int:
    """Spyre: fill, then max(MAC-limited, B-operand-stick-limited) streaming, then drain; a pass with
    fewer rows or columns costs the same (the array is padded). Plain: the (rows x k) @ (k x cols)
    GEMM on a textbook array, as SCALE-Sim v3 counts it (systolic.gemm)."""
    pt = machine.pt
    if pt.plain:
        return systolic.gemm(rows, cols or pt.cols_per_pass, k, pt.pe_rows, pt.pe_cols, pt.dataflow).total_cycles
    macs = pt.rows_per_pass * k * pt.cols_per_pass
    compute = -(-macs // pt.macs_per_cycle(dtype))
    b_sticks = -(-(k * pt.cols_per_pass * DTYPE_BYTES[dtype]) // STICK_BYTES)
    return pt.fill_cycles + max(compute, b_sticks) + pt.drain_cycles


def sfu_stick_cycles(machine: Machine, op: str) -> int:
    lanes_per_stick = STICK_BYTES // 2
    return machine.sfu.cost_cycles[SFU_OPS[op].cost_class] * max(1, lanes_per_stick // machine.sfu.lanes_fp16)


def pack(program: UnitProgram, machine: Machine, max_cycles: int, chain_hops: bool = True,
         serve_ahead: bool = True) -> Packed:
    names = unit_names(machine)
    us = _units(machine)
    cols = program.columns
    ins, toks = _table(cols, machine, us)
    state = _state(machine, ins, toks, us, len(cols.tokens), len(cols.instructions), max_cycles)
    state[L.ST_CFG][L.C_CHAIN] = chain_hops
    state[L.ST_CFG][L.C_SERVE_AHEAD] = serve_ahead
    state[L.ST_CFG][L.C_SEND_HOLD] = machine.ring.send_stick_cycles
    state[L.ST_CFG][L.C_PIECE_SETUP] = machine.dma.piece_setup_cycles
    state[L.ST_CFG][L.C_LINE_SHIFT] = machine.dram.interleave_bytes.bit_length() - 1
    state[L.ST_CFG][L.C_CHANNEL_SHIFT] = machine.dram.channels.bit_length() - 1
    state[L.ST_CFG][L.C_ROW_SHIFT] = machine.dram.row_bytes.bit_length() - 1
    state[L.ST_CFG][L.C_BANK_SHIFT] = machine.dram.banks.bit_length() - 1
    state[L.ST_CFG][L.C_HASH_GROUPS] = machine.dram.hash_groups() if machine.dram.channel_hash == "xor" else 1
    return Packed(state, cols.instructions, names, list(cols.tokens))


def _table(cols: Columns, machine: Machine, us: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The instruction table and the token lists, with numpy over the program's columns; sets each
    unit's instruction range in ``us``."""
    n, per_core = len(cols.op), len(CORE_UNITS)
    if not n:
        return np.zeros((1, L.I_COLS), np.int64), np.zeros(1, np.int64)
    unit = np.where(cols.stream_core == HOST_CORE, machine.cores.count * per_core,
                    cols.stream_core * per_core + cols.stream_slot)
    end = np.cumsum(cols.stream_len)
    us[unit, L.U_PC] = us[unit, L.U_OLDEST] = end - cols.stream_len
    us[unit, L.U_END] = end
    ins = np.zeros((n, L.I_COLS), np.int64)
    ins[:, L.I_OP] = cols.op
    ins[:, L.I_UNIT] = np.repeat(unit, cols.stream_len)
    if len(cols.toks):  # else every range is empty, at 0
        ins[:, L.I_W0], ins[:, L.I_W1] = cols.bounds[0], cols.bounds[1]
        ins[:, L.I_S0], ins[:, L.I_S1] = cols.bounds[1], cols.bounds[2]
    for op, rows in cols.rows.items():
        every = len(rows) == n  # then slices, not gathers
        _ENCODERS[op](ins, slice(None) if every else rows, cols.args if every else cols.args[:, rows], cols,
                      machine)
    return ins, cols.toks if len(cols.toks) else np.zeros(1, np.int64)


# An encoder fills the table's rows ``at`` of one op from ``a``, those instructions' columns of args.
def _dma(ins: np.ndarray, at, a: np.ndarray, cols: Columns, machine: Machine) -> None:
    """Loads, stores and PCIe copies: addresses, bytes, pieces, a multicast's stops and count."""
    ins[at, L.I_A0], ins[at, L.I_A1], ins[at, L.I_A2] = a[C.DMA_DRAM], a[C.DMA_LX], a[C.DMA_BYTES]
    ins[at, L.I_A5], ins[at, L.I_A6] = a[C.DMA_PIECE], a[C.DMA_STRIDE]
    if ins[at, L.I_OP][0] in (Op.H2D, Op.D2H):
        ins[at, L.I_DUR] = machine.pcie.latency_cycles
    to = a[C.DMA_TO]
    if cols.to_sets and (to >= 0).any():
        stop = _core_stops(machine)
        masks = np.array([sum(1 << int(stop[c]) for c in cores) for cores in cols.to_sets], np.int64)
        sizes = np.array([len(cores) for cores in cols.to_sets], np.int64)
        multicast = np.arange(ins.shape[0])[at][to >= 0]
        ins[multicast, L.I_A3], ins[multicast, L.I_A4] = masks[to[to >= 0]], sizes[to[to >= 0]]


def _send(ins: np.ndarray, at, a: np.ndarray, cols: Columns, machine: Machine) -> None:
    ins[at, L.I_A0], ins[at, L.I_A1], ins[at, L.I_A2] = a[C.SEND_LX], a[C.SEND_TO_CORE], a[C.SEND_BYTES]
    ins[at, L.I_A3] = _core_stops(machine)[a[C.SEND_TO_CORE]]
    ins[at, L.I_A5] = ins[at, L.I_A6] = a[C.SEND_BYTES]  # one piece


def _move(ins: np.ndarray, at, a: np.ndarray, cols: Columns, machine: Machine) -> None:
    """LX <-> FIFO: sticks."""
    ins[at, L.I_A4] = a[C.MOVE_BYTES] // STICK_BYTES


def _matmul(ins: np.ndarray, at, a: np.ndarray, cols: Columns, machine: Machine) -> None:
    """``repeat`` passes: the cycles of each distinct pass shape are worked out once."""
    cycles = np.array([pt_pass_cycles(machine, r, k, dtype, c) for r, k, dtype, c in cols.passes], np.int64)
    ins[at, L.I_DUR] = a[C.MM_REPEAT] * cycles[a[C.MM_PASS]]


def _sfu(ins: np.ndarray, at, a: np.ndarray, cols: Columns, machine: Machine) -> None:
    per_stick = np.array([sfu_stick_cycles(machine, name) for name in SFU_OPS], np.int64)[a[C.SFU_CODE]]
    latency = machine.sfu.latency_cycles
    ins[at, L.I_A0], ins[at, L.I_A1] = a[C.SFU_CODE], a[C.SFU_FIFO_IN]
    ins[at, L.I_A3], ins[at, L.I_A4] = a[C.SFU_FIFO_OUT], a[C.SFU_STICKS]
    ins[at, L.I_A5], ins[at, L.I_A6] = per_stick, latency
    ins[at, L.I_DUR] = latency + a[C.SFU_STICKS] * per_stick


_ENCODERS = {Op.LOAD: _dma, Op.STORE: _dma, Op.H2D: _dma, Op.D2H: _dma, Op.SEND: _send,
             Op.LX2FIFO: _move, Op.FIFO2LX: _move, Op.MATMUL: _matmul, Op.SFU: _sfu}


@cache
def _mover_units(cores: int) -> np.ndarray:
    """The units that may have sticks in flight: each core's load, store and send, and the host's."""
    slots = [CORE_UNITS.index(u) for u in ("load", "store", "send")]
    units = np.array([c * len(CORE_UNITS) + s for c in range(cores) for s in slots] + [cores * len(CORE_UNITS)])
    units.setflags(write=False)
    return units


def _core_stops(machine: Machine) -> np.ndarray:
    """Each core's ring stop (read-only)."""
    return _core_stops_of(machine.ring.stops, machine.cores.count)


# What depends on the ring and the core count only is worked out once per ring and count: pack runs
# once per simulation, and short programs simulate in about the time a Python loop over units takes.
@cache
def _core_stops_of(stops: tuple[str, ...], cores: int) -> np.ndarray:
    stop = {name: s for s, name in enumerate(stops)}
    out = np.array([stop[f"core{c}"] for c in range(cores)], np.int64)
    out.setflags(write=False)
    return out


def _units(machine: Machine) -> np.ndarray:
    return _units_of(machine.ring.stops, machine.cores.count, pcie_interval_fp(machine)).copy()


@cache
def _units_of(stops: tuple[str, ...], cores: int, pcie_fp: int) -> np.ndarray:
    count = cores * len(CORE_UNITS) + 1
    us = np.zeros((count, L.U_COLS), np.int64)
    us[:, [L.U_WAITTOK, L.U_WAITSINCE, L.U_BLOCKSINCE]] = -1
    us[:, L.U_INTERVAL_FP] = L.FP_ONE
    core = np.arange(count - 1) // len(CORE_UNITS)
    us[:-1, L.U_STOP] = _core_stops_of(stops, cores)[core]
    us[:-1, L.U_CORE] = core
    us[:-1, L.U_CORELET] = 2 * core + np.tile([u.endswith("1") for u in CORE_UNITS], cores)
    host = count - 1
    us[host, L.U_STOP] = stops.index("pcie")
    us[host, L.U_CORE] = HOST_CORE
    us[host, L.U_INTERVAL_FP] = pcie_fp
    us.setflags(write=False)
    return us


def pcie_interval_fp(machine: Machine) -> int:
    """Cycles per stick on the PCIe link, in 1/FP_ONE cycles, with TLP overhead."""
    p = machine.pcie
    wire_bytes = STICK_BYTES * (p.max_payload_bytes + p.tlp_overhead_bytes) / p.max_payload_bytes
    return round(wire_bytes / (p.gbytes_per_s / machine.clock.ghz) * L.FP_ONE)


def _state(machine: Machine, ins, toks, us, n_tokens: int, n_ins: int, max_cycles: int) -> tuple:
    from .queue import new_queue  # noqa: PLC0415 -- the jitted module: numba loads with the first pack, not with
    # this module (the report imports sfu_stick_cycles from it)
    d, n_units = machine.dram, us.shape[0]
    cfg = np.zeros(L.C_COLS, np.int64)
    cfg[[L.C_HOP, L.C_BURST, L.C_INFLIGHT, L.C_INTERLEAVE, L.C_CHANNELS, L.C_BANKS, L.C_ROW,
         L.C_STICK_CYC, L.C_RCD, L.C_RL, L.C_WL, L.C_RP, L.C_RAS, L.C_WR, L.C_WTR, L.C_RTW, L.C_REFI,
         L.C_RFC, L.C_FIFO_DEPTH, L.C_STOPS, L.C_UNITS, L.C_MAX_CYCLES, L.C_CLOSED_PAGE]] = [
        machine.ring.hop_latency_cycles, machine.dma.max_burst_bytes, machine.dma.max_inflight_bytes,
        d.interleave_bytes, d.channels, d.banks, d.row_bytes, d.stick_cycles, d.t_rcd_cycles,
        d.t_rl_cycles, d.t_wl_cycles, d.t_rp_cycles, d.t_ras_cycles, d.t_wr_cycles, d.t_wtr_cycles,
        d.t_rtw_cycles, d.t_refi_cycles, d.t_rfc_cycles, machine.fifo.depth_sticks,
        len(machine.ring.stops), n_units, max_cycles, d.page_policy == "closed"]
    ch, bank = (a.copy() for a in _dram_of(d.channels, d.banks, d.t_refi_cycles, d.t_wr_cycles))
    fifo = _fifos_of(machine.cores.count).copy()
    link = np.zeros((2 * len(machine.ring.stops), L.L_COLS), np.int64)
    inflight_sticks = machine.dma.max_inflight_bytes // STICK_BYTES
    movers = _mover_units(machine.cores.count)
    movers = movers[us[movers, L.U_END] > us[movers, L.U_PC]]  # the DMA units that have instructions
    # Request slots: unit u's are rows u * inflight_sticks on, all free, the first one first (layout.U_CHUNK;
    # the rest are reached as each is first taken, so that pack writes none of the table: it is mostly never
    # touched); only DMA units issue.
    chunk = np.zeros((max(int(movers.max(initial=-1)) + 1, 1) * inflight_sticks, L.K_COLS), np.int64)
    us[:len(chunk) // inflight_sticks, L.U_CHUNK] = np.arange(0, len(chunk), inflight_sticks)
    chan_stop = _channel_stops_of(machine.ring.stops, d.channels, d.controllers).copy()  # numba: writable
    rx_port = np.zeros(machine.cores.count, np.int64)
    # Pending events: one per in-flight stick or request of each DMA unit that has instructions (a
    # multicast stick: one per direction, and one per copy being written where it passed:
    # ring.travel_nb), one per stick in a FIFO (becoming visible), and a few per unit and channel.
    fifo_sticks = 4 * machine.cores.count * machine.fifo.depth_sticks
    loads = ins[ins[:, L.I_OP] == Op.LOAD, L.I_A4] if len(movers) else ins[:0, L.I_A4]  # no DMA unit: no load
    ev, qa = new_queue(len(movers) * 2 * inflight_sticks + n_units * 8
                       + machine.cores.count * inflight_sticks * int(loads.max(initial=0)) + fifo_sticks + 1024)
    times = np.empty((L.T_ROWS, max(n_ins, 1)), np.int64)
    times.fill(-1)
    times[L.T_STALL_DATA:L.T_STALL_ROOM + 1] = 0
    order = np.zeros(max(n_ins, 1) + 1, np.int64)
    pending = np.zeros(2 * len(machine.ring.stops), np.int64)
    writes = np.zeros(L.W_COLS, np.int64)
    writes[L.W_STORES] = np.count_nonzero(ins[:n_ins, L.I_OP] == Op.STORE)
    writes[L.W_H2D] = np.count_nonzero(ins[:n_ins, L.I_OP] == Op.H2D)
    return (ins, toks, us, np.zeros(max(n_tokens, 1), np.int64), cfg, ch, bank, fifo, link, chunk,
            chan_stop, rx_port, ev, qa, times, order, pending, _stops(machine, us), writes)


@cache
def _dram_of(channels: int, banks: int, t_refi: int, t_wr: int) -> tuple[np.ndarray, np.ndarray]:
    """The DRAM channels and banks before the run (read-only: pack copies them; numba compiles read-only
    arrays as another type)."""
    ch = np.zeros((channels, L.D_COLS), np.int64)
    ch[:, [L.D_LASTW, L.D_QHEAD_R, L.D_QTAIL_R, L.D_QHEAD_W, L.D_QTAIL_W]] = -1
    ch[:, L.D_ARMED] = L.NEVER
    ch[:, L.D_LAST_T] = -1
    ch[:, L.D_NEXTREF] = t_refi + np.arange(channels) * (t_refi // channels)
    bank = np.zeros((channels * banks, L.B_COLS), np.int64)
    bank[:, L.B_ROW] = -1
    bank[:, L.B_WREND] = -t_wr  # no write yet: write recovery never delays a precharge
    for a in (ch, bank):
        a.setflags(write=False)
    return ch, bank


@cache
def _fifos_of(cores: int) -> np.ndarray:
    fifo = np.zeros((4 * cores, L.F_COLS), np.int64)
    fifo[:, [L.F_WDATA, L.F_WROOM]] = -1
    fifo.setflags(write=False)
    return fifo


@cache
def _channel_stops_of(stops: tuple[str, ...], channels: int, controllers: int) -> np.ndarray:
    """Each DRAM channel's ring stop: its memory controller's."""
    per_mc = channels // controllers
    out = np.array([stops.index(f"mc{c // per_mc}") for c in range(channels)], np.int64)
    out.setflags(write=False)
    return out


def _stops(machine: Machine, us: np.ndarray) -> np.ndarray:
    """``_stops_of``, with a stop whose store and send units have no instruction at all marked quiet: it
    never puts a stick on the ring (``ring._injection_horizon_nb`` then reads no unit at every crossing)."""
    stops = _stops_of(machine.ring.stops, machine.cores.count).copy()
    units = stops[:, [L.R_INJ0, L.R_INJ1]]
    idle = np.where(units >= 0, us[units, L.U_END] <= us[units, L.U_PC], True).all(axis=1)
    stops[idle & (stops[:, L.R_KIND] == L.STOP_UNITS), L.R_KIND] = L.STOP_QUIET
    return stops


@cache
def _stops_of(names: tuple[str, ...], cores: int) -> np.ndarray:
    """Per ring stop: what can put sticks on the ring there (see ring.travel_nb)."""
    per_core = len(CORE_UNITS)
    stops = np.full((len(names), 3), -1, np.int64)
    stops[:, L.R_KIND] = L.STOP_QUIET
    for s, name in enumerate(names):
        if name.startswith("mc"):
            stops[s, L.R_KIND] = L.STOP_MEMORY
        elif name == HOST_UNIT:
            stops[s, [L.R_KIND, L.R_INJ0]] = L.STOP_UNITS, cores * per_core
        else:
            base = int(name.removeprefix("core")) * per_core
            stops[s] = L.STOP_UNITS, base + CORE_UNITS.index("store"), base + CORE_UNITS.index("send")
    stops.setflags(write=False)
    return stops
