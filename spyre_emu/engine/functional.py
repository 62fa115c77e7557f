"""Functional mode: replay the timed instructions on real bytes, in the order they took effect.

The engine itself is timing-only. Replaying each instruction atomically in completion
order gives the bytes the card would hold for any program whose buffers are guarded by
tokens (a reader waits for its writer's signal, so it also completes after it).
A FIFO producer takes effect at its first push, since its consumer runs alongside it.
Inputs sit in DRAM before the run (``h2d``/``d2h`` only time the PCIe transfer).
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..errors import SimulationError
from ..numerics import from_f32, to_f32
from ..unit_program import Instruction, UnitProgram
from ..unit_program.model import dram_pieces, lx_pieces, matmul_a_sticks, matmul_c_sticks, matmul_passes
from ..unit_program.opcodes import SFU_OPERANDS, SFU_OPS
from .functional_ops import sfu_apply
from .log import EventLog

PAGE_BYTES = 1 << 16


class Memory:
    """Sparse byte-addressed DRAM: only touched 64 KB pages exist."""

    def __init__(self) -> None:
        self.pages: dict[int, np.ndarray] = {}

    def _spans(self, addr: int, nbytes: int):
        while nbytes > 0:
            page, offset = divmod(addr, PAGE_BYTES)
            take = min(nbytes, PAGE_BYTES - offset)
            yield page, offset, take
            addr, nbytes = addr + take, nbytes - take

    def read(self, addr: int, nbytes: int) -> np.ndarray:
        out = np.zeros(nbytes, np.uint8)
        pos = 0
        for page, offset, take in self._spans(addr, nbytes):
            if page in self.pages:
                out[pos:pos + take] = self.pages[page][offset:offset + take]
            pos += take
        return out

    def write(self, addr: int, data: np.ndarray) -> None:
        pos = 0
        for page, offset, take in self._spans(addr, len(data)):
            if page not in self.pages:  # (not setdefault: that would allocate a page on every write)
                self.pages[page] = np.zeros(PAGE_BYTES, np.uint8)
            self.pages[page][offset:offset + take] = data[pos:pos + take]
            pos += take


class Card:
    """The card's bytes: DRAM, each core's LX, each corelet's two FIFOs."""

    def __init__(self, machine: Machine) -> None:
        self.machine = machine
        self.dram = Memory()
        self.lx: dict[int, np.ndarray] = {}
        self.fifos: dict[tuple[int, str], deque] = {}

    def lx_of(self, core: int) -> np.ndarray:
        """The core's LX, made on first use (not setdefault: that would allocate 2 MB on every call)."""
        if core not in self.lx:
            self.lx[core] = np.zeros(self.machine.lx.size_bytes, np.uint8)
        return self.lx[core]

    def fifo(self, ins: Instruction, which: str) -> deque:
        return self.fifos.setdefault((ins.core, ins.unit[-1] + which), deque())


def replay(program: UnitProgram, log: EventLog, machine: Machine, inputs: dict[str, np.ndarray]) -> Card:
    """Apply every instruction to a Card holding ``inputs`` (buffer name -> bytes)."""
    card = Card(machine)
    for name, data in inputs.items():
        card.dram.write(program.buffers[name].addr, data)
    pending: list[Instruction] = []
    for i in _effect_order(log):
        pending.append(log.instructions[i])
        pending = [ins for ins in pending if not _apply(card, ins)]
    if pending:
        raise SimulationError(f"functional replay: {pending[0].path} read more FIFO sticks than were pushed",
                              program.source)
    return card


def _effect_order(log: EventLog) -> list[int]:
    key = np.where(log.first_push >= 0, log.first_push, log.end)
    return sorted(range(len(log.instructions)), key=lambda i: (key[i], log.order[i]))


def _apply(card: Card, ins: Instruction) -> bool:
    """Apply one instruction; False if its input FIFO does not yet hold enough sticks."""
    a, lx = ins.args, card.lx_of(ins.core) if ins.core >= 0 else None
    if ins.op == "load":
        shift = _indirect_shift(card, ins) if "index_lx" in a else 0
        data = np.concatenate([card.dram.read(addr + shift, n) for addr, n in dram_pieces(a)])
        for core in a.get("to", [ins.core]):
            at = card.lx_of(core)
            for i, (off, n) in enumerate(lx_pieces(a)):
                at[off:off + n] = data[i * n:(i + 1) * n]
    elif ins.op == "store":
        data = np.concatenate([lx[off:off + n] for off, n in lx_pieces(a)])
        for i, (addr, n) in enumerate(dram_pieces(a)):
            card.dram.write(addr, data[i * n:(i + 1) * n].copy())
    elif ins.op == "send":
        card.lx_of(a["to_core"])[a["to_lx"]:a["to_lx"] + a["bytes"]] = lx[a["lx"]:a["lx"] + a["bytes"]]
    elif ins.op == "lx2fifo":
        card.fifo(ins, "in").extend(_sticks(lx[a["lx"]:a["lx"] + a["bytes"]]))
    elif ins.op == "fifo2lx":
        n = a["bytes"] // STICK_BYTES
        if len(card.fifo(ins, "out")) < n:
            return False
        lx[a["lx"]:a["lx"] + a["bytes"]] = np.concatenate([card.fifo(ins, "out").popleft() for _ in range(n)])
    elif ins.op == "matmul":
        for one in matmul_passes(a):
            _matmul(card.machine, lx, one)
    elif ins.op in SFU_OPS:
        return _sfu(card, ins, lx)
    return True


def _indirect_shift(card: Card, ins: Instruction) -> int:
    """An indirect load reads the row its core holds in LX at ``index_lx`` (an int32), not the
    ``index_row`` its address was lowered for: the bytes between the two rows."""
    a = ins.args
    value = int(card.lx_of(ins.core)[a["index_lx"]:a["index_lx"] + 4].view(np.int32)[0])
    if not 0 <= value < a["index_rows"]:
        raise SimulationError(f"functional replay: {ins.path} reads row {value} of a table of {a['index_rows']} "
                              "rows (an index out of range)")
    return (value - a["index_row"]) * a["index_pitch"]


def _sticks(data: np.ndarray) -> list[np.ndarray]:
    return [s.copy() for s in data.reshape(-1, STICK_BYTES)]


def _matmul(machine: Machine, lx: np.ndarray, a: dict) -> None:
    dtype, rows, k = a.get("dtype", "fp16"), a["rows"], a["k"]
    db, cols = DTYPE_BYTES[dtype], a.get("cols", machine.pt.cols_per_pass)
    per_row, k_stride, row_stride = matmul_a_sticks(a, db)
    sticks = (np.arange(rows)[:, None] * row_stride + np.arange(per_row)[None, :] * k_stride).reshape(-1)
    raw = lx[(a["a"] + sticks[:, None] * STICK_BYTES + np.arange(STICK_BYTES)[None, :]).reshape(-1)]
    lhs = to_f32(raw.reshape(rows, per_row * STICK_BYTES)[:, :k * db].copy().reshape(-1), dtype).reshape(rows, k)
    if "b_k_stride" in a:  # B's k rows a stick each, b_k_stride sticks apart
        at = a["b"] + np.arange(k)[:, None] * a["b_k_stride"] * STICK_BYTES + np.arange(STICK_BYTES)[None, :]
        rhs = to_f32(lx[at.reshape(-1)].copy(), dtype).reshape(k, cols)
    else:
        rhs = to_f32(lx[a["b"]:a["b"] + k * cols * db].copy(), dtype).reshape(k, cols)  # B packed, k-major
    width = -(-cols * 2 // STICK_BYTES) * STICK_BYTES // 2  # each C row is whole fp16 sticks; padding lanes get 0
    out = lhs.astype(np.float32) @ np.pad(rhs.astype(np.float32), ((0, 0), (0, width - cols)))
    c_stride = matmul_c_sticks(a, cols)[1]
    c = (a["c"] + np.arange(rows)[:, None] * c_stride * STICK_BYTES + np.arange(width * 2)[None, :]).reshape(-1)
    if a.get("accumulate"):
        out += to_f32(lx[c].copy(), "fp16").reshape(rows, width)
    lx[c] = from_f32(out.reshape(-1), "fp16")


def _sfu(card: Card, ins: Instruction, lx: np.ndarray) -> bool:
    a, n, dtype = ins.args, ins.args["sticks"], ins.args.get("dtype", "fp16")
    lanes = STICK_BYTES // DTYPE_BYTES[dtype]
    if a["a"] == "fifo":
        if len(card.fifo(ins, "in")) < n:
            return False
        x = np.concatenate([card.fifo(ins, "in").popleft() for _ in range(n)])
        operands = [to_f32(x, dtype).reshape(n, lanes)]
    else:
        operands = []
    for field in SFU_OPERANDS[len(operands):SFU_OPS[ins.op].arity]:
        count = 1 if a.get(f"{field}_broadcast") else n
        value = to_f32(lx[a[field]:a[field] + count * STICK_BYTES].copy(), dtype).reshape(count, lanes)
        if a.get(f"{field}_splat"):  # lane 0 to every lane as the LX load unit reads it
            value = np.repeat(value[:, :1], lanes, axis=1)
        operands.append(np.broadcast_to(value, (n, lanes)))
    out = from_f32(sfu_apply(ins.op, *operands).reshape(-1), a.get("out_dtype", dtype))
    if a["out"] == "fifo":
        card.fifo(ins, "out").extend(_sticks(out))
    else:
        lx[a["out"]:a["out"] + len(out)] = out
    return True
