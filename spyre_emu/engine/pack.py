"""UnitProgram + Machine -> the struct-of-arrays state tuple the jitted loop runs on.

Fixed durations (PT passes, SFU ops on LX) are computed here, once, from the machine's
[pt] and [sfu] sections; everything that contends (ring, DRAM, FIFOs, ports) is left to
the loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..unit_program import HOST_CORE, Instruction, UnitProgram
from ..unit_program.model import matmul_repeat
from ..unit_program.opcodes import CORE_UNITS, HOST_UNIT, SFU_OPS, Op
from . import layout as L
from . import systolic
from .queue import new_queue

OP_BY_NAME = {op.name.lower(): op for op in Op}  # "load" -> Op.LOAD, without an Enum lookup per instruction


@dataclass(frozen=True)
class Packed:
    """The state tuple plus what is needed to read it back."""

    state: tuple
    instructions: list[Instruction]
    unit_names: list[str]
    tokens: list[str]


def unit_names(machine: Machine) -> list[str]:
    names = [f"core{c}.{u}" for c in range(machine.cores.count) for u in CORE_UNITS]
    return [*names, HOST_UNIT]


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


def pack(program: UnitProgram, machine: Machine, max_cycles: int, chain_hops: bool = True) -> Packed:
    instructions = program.instructions()
    names = unit_names(machine)
    us = _units(machine, len(names))
    ins, toks, tokens = _table(program, machine, us)
    state = _state(machine, ins, toks, us, len(tokens), len(instructions), max_cycles)
    state[L.ST_CFG][L.C_CHAIN] = chain_hops
    state[L.ST_CFG][L.C_SEND_HOLD] = machine.ring.send_stick_cycles
    state[L.ST_CFG][L.C_PIECE_SETUP] = machine.dma.piece_setup_cycles
    state[L.ST_CFG][L.C_LINE_SHIFT] = machine.dram.interleave_bytes.bit_length() - 1
    state[L.ST_CFG][L.C_CHANNEL_SHIFT] = machine.dram.channels.bit_length() - 1
    state[L.ST_CFG][L.C_HASH_GROUPS] = machine.dram.hash_groups() if machine.dram.channel_hash == "xor" else 1
    return Packed(state, instructions, names, tokens)


def _table(program: UnitProgram, machine: Machine, us: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """The instruction table, the token lists and the token names; sets each unit's instruction range
    in ``us``. Programs repeat instructions: each distinct (op, args) is encoded once, then the rows
    are gathered and the unit and token columns filled with numpy."""
    token_id: dict[str, int] = {}  # numbered in order of first use (only a deadlock message names them)
    shapes: dict[tuple, int] = {}
    encoded: list[list[int]] = []
    shape_of: list[int] = []
    unit_of: list[int] = []
    bounds: list[int] = []  # per instruction: where its waits start, where its signals start and end
    toks: list[int] = []
    for (core, unit), stream in program.streams.items():
        u = unit_index(machine, core, unit)
        us[u, L.U_PC], us[u, L.U_END] = len(shape_of), len(shape_of) + len(stream)
        us[u, L.U_OLDEST] = us[u, L.U_PC]
        unit_of += [u] * len(stream)
        for item in stream:
            key = (item.op, *item.args.items())
            k = shapes.get(key)
            if k is None:
                k = shapes[key] = len(encoded)
                encoded.append(_encode(item, machine))
            shape_of.append(k)
            first = len(toks)
            if item.wait or item.signal:
                toks += [token_id.setdefault(t, len(token_id)) for t in item.wait]
                bounds += (first, len(toks))
                toks += [token_id.setdefault(t, len(token_id)) for t in item.signal]
                bounds.append(len(toks))
            else:
                bounds += (first, first, first)
    if not shape_of:
        return np.zeros((1, L.I_COLS), np.int64), np.zeros(1, np.int64), []
    ins = np.array(encoded, np.int64)[shape_of]
    ins[:, L.I_UNIT] = unit_of
    b = np.array(bounds, np.int64).reshape(-1, 3)
    ins[:, L.I_W0], ins[:, L.I_W1], ins[:, L.I_S0], ins[:, L.I_S1] = b[:, 0], b[:, 1], b[:, 1], b[:, 2]
    return ins, np.array(toks or [0], np.int64), list(token_id)


def _encode(item: Instruction, machine: Machine) -> list[int]:
    """The instruction's row of the table, without its unit and token ranges."""
    row = [0] * L.I_COLS
    a = item.args
    if item.op in SFU_OPS:
        per_stick, latency = sfu_stick_cycles(machine, item.op), machine.sfu.latency_cycles
        row[L.I_OP], row[L.I_A0] = Op.SFU, SFU_OPS[item.op].code
        row[L.I_A1], row[L.I_A3] = int(a["a"] == "fifo"), int(a["out"] == "fifo")
        row[L.I_A4], row[L.I_A5], row[L.I_A6] = a["sticks"], per_stick, latency
        row[L.I_DUR] = latency + a["sticks"] * per_stick
        return row
    op = OP_BY_NAME[item.op]
    row[L.I_OP] = op
    if op in (Op.LOAD, Op.STORE, Op.H2D, Op.D2H):
        row[L.I_A0], row[L.I_A1], row[L.I_A2] = a["dram"], a.get("lx", 0), a["bytes"]
        row[L.I_A5] = a.get("piece", a["bytes"])
        row[L.I_A6] = a.get("stride", row[L.I_A5])
        row[L.I_DUR] = machine.pcie.latency_cycles if op in (Op.H2D, Op.D2H) else 0
        if "to" in a:
            row[L.I_A3] = sum(1 << machine.stop_of(f"core{c}") for c in a["to"])
            row[L.I_A4] = len(a["to"])
    elif op == Op.SEND:
        row[L.I_A0], row[L.I_A1], row[L.I_A2] = a["lx"], a["to_core"], a["bytes"]
        row[L.I_A3] = machine.stop_of(f"core{a['to_core']}")
        row[L.I_A5] = row[L.I_A6] = a["bytes"]  # one piece
    elif op in (Op.LX2FIFO, Op.FIFO2LX):
        row[L.I_A4] = a["bytes"] // STICK_BYTES
    else:
        row[L.I_DUR] = matmul_repeat(a) * pt_pass_cycles(machine, a["rows"], a["k"], a.get("dtype", "fp16"),
                                                         a.get("cols"))
    return row


def _units(machine: Machine, count: int) -> np.ndarray:
    us = np.zeros((count, L.U_COLS), np.int64)
    us[:, [L.U_WAITTOK, L.U_WAITSINCE, L.U_BLOCKSINCE]] = -1
    us[:, L.U_INTERVAL_FP] = L.FP_ONE
    per_core = len(CORE_UNITS)
    for u in range(count - 1):
        core, slot = divmod(u, per_core)
        us[u, L.U_STOP] = machine.stop_of(f"core{core}")
        us[u, L.U_CORE] = core
        us[u, L.U_CORELET] = 2 * core + (1 if CORE_UNITS[slot].endswith("1") else 0)
    host = count - 1
    us[host, L.U_STOP] = machine.stop_of("pcie")
    us[host, L.U_CORE] = HOST_CORE
    us[host, L.U_INTERVAL_FP] = pcie_interval_fp(machine)
    return us


def pcie_interval_fp(machine: Machine) -> int:
    """Cycles per stick on the PCIe link, in 1/FP_ONE cycles, with TLP overhead."""
    p = machine.pcie
    wire_bytes = STICK_BYTES * (p.max_payload_bytes + p.tlp_overhead_bytes) / p.max_payload_bytes
    return round(wire_bytes / (p.gbytes_per_s / machine.clock.ghz) * L.FP_ONE)


def _state(machine: Machine, ins, toks, us, n_tokens: int, n_ins: int, max_cycles: int) -> tuple:
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
    ch = np.zeros((d.channels, L.D_COLS), np.int64)
    ch[:, [L.D_LASTW, L.D_QHEAD_R, L.D_QTAIL_R, L.D_QHEAD_W, L.D_QTAIL_W]] = -1
    ch[:, L.D_NEXTREF] = d.t_refi_cycles + np.arange(d.channels) * (d.t_refi_cycles // d.channels)
    bank = np.zeros((d.channels * d.banks, L.B_COLS), np.int64)
    bank[:, L.B_ROW] = -1
    bank[:, L.B_WREND] = -d.t_wr_cycles  # no write yet: write recovery never delays a precharge
    fifo = np.zeros((4 * machine.cores.count, L.F_COLS), np.int64)
    fifo[:, [L.F_WDATA, L.F_WROOM]] = -1
    link = np.zeros((2 * len(machine.ring.stops), L.L_COLS), np.int64)
    chunk = np.zeros((n_units * (machine.dma.max_inflight_bytes // STICK_BYTES), L.K_COLS), np.int64)
    per_mc = d.channels // d.controllers
    chan_stop = np.array([machine.stop_of(f"mc{c // per_mc}") for c in range(d.channels)], np.int64)
    rx_port = np.zeros(machine.cores.count, np.int64)
    # Pending events: one per in-flight stick or request of each DMA unit (a multicast stick: one
    # per direction, and one per copy being written where it passed: ring.travel_nb), one per stick
    # in a FIFO (becoming visible), and a few per unit and channel.
    fifo_sticks = 4 * machine.cores.count * machine.fifo.depth_sticks
    inflight_sticks = machine.dma.max_inflight_bytes // STICK_BYTES
    copies = int(ins[ins[:, L.I_OP] == Op.LOAD, L.I_A4].max(initial=0))
    ev, qa = new_queue(n_units * (2 * inflight_sticks + 8) + machine.cores.count * inflight_sticks * copies
                       + fifo_sticks + 1024)
    times = np.full((L.T_ROWS, max(n_ins, 1)), -1, np.int64)
    times[[L.T_STALL_DATA, L.T_STALL_ROOM]] = 0
    order = np.zeros(max(n_ins, 1) + 1, np.int64)
    pending = np.zeros(2 * len(machine.ring.stops), np.int64)
    return (ins, toks, us, np.zeros(max(n_tokens, 1), np.int64), cfg, ch, bank, fifo, link, chunk,
            chan_stop, rx_port, ev, qa, times, order, pending, _stops(machine))


def _stops(machine: Machine) -> np.ndarray:
    """Per ring stop: what can put sticks on the ring there (see ring.travel_nb)."""
    stops = np.full((len(machine.ring.stops), 3), -1, np.int64)
    stops[:, L.R_KIND] = L.STOP_QUIET
    for s, name in enumerate(machine.ring.stops):
        if name.startswith("mc"):
            stops[s, L.R_KIND] = L.STOP_MEMORY
        elif name == HOST_UNIT:
            stops[s, [L.R_KIND, L.R_INJ0]] = L.STOP_UNITS, unit_index(machine, HOST_CORE, HOST_UNIT)
        else:
            core = int(name.removeprefix("core"))
            stops[s] = L.STOP_UNITS, unit_index(machine, core, "store"), unit_index(machine, core, "send")
    return stops
