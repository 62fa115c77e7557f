"""A unit program's instructions as integer columns, built once when the program is made.

``engine.pack`` turns these into the engine's instruction table with numpy over whole columns:
a Python loop over the instructions there would cost more than simulating a compute-bound
program (12,800 PT passes: about 40 ms of loop against 2 ms of simulation). Nothing here
depends on the machine; what does (pass cycles, ring stops, unit numbers) pack computes per
distinct value (``to_sets``, ``passes``) or per stream.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import chain, count

import numpy as np

from .model import Instruction, matmul_repeat
from .opcodes import CORE_UNITS, SFU_OPS, Op

# Rows of ``Columns.args`` (one column per instruction), by op (unused ones are 0).
DMA_DRAM, DMA_LX, DMA_BYTES, DMA_PIECE, DMA_STRIDE, DMA_TO = range(6)  # load, store, h2d, d2h; DMA_TO: -1 or in to_sets
SEND_LX, SEND_TO_CORE, SEND_BYTES = range(3)
MOVE_BYTES = 0                                                          # lx2fifo, fifo2lx
MM_PASS, MM_REPEAT = range(2)                                           # MM_PASS: index in passes
SFU_CODE, SFU_FIFO_IN, SFU_FIFO_OUT, SFU_STICKS = range(4)             # op is Op.SFU, the SFU op's code here
ARG_COLS = 6

DMA_OPS = (Op.LOAD, Op.STORE, Op.H2D, Op.D2H)
OP_OF = {op.name.lower(): op for op in Op}
HOST_SLOT = len(CORE_UNITS)  # ``stream_slot`` of the host's PCIe stream


@dataclass(frozen=True)
class Columns:
    """Instructions in stream order (``UnitProgram.streams``), as arrays.

    Per stream: its core, its unit's index in CORE_UNITS (HOST_SLOT for the host) and its length.
    Per instruction (a column each, so that one argument of every instruction is contiguous):
    ``args`` (the rows above), and ``bounds``: where its waits start, where its signals start and
    where they end in ``toks``, the token numbers; tokens are numbered in order of first use
    (``tokens`` holds their names, for a deadlock message). ``op`` is each instruction's Op.
    ``rows`` lists the instructions of each op present, in order.
    """

    instructions: tuple[Instruction, ...]
    stream_core: np.ndarray
    stream_slot: np.ndarray
    stream_len: np.ndarray
    op: np.ndarray
    args: np.ndarray                            # [ARG_COLS, instructions]
    rows: dict[Op, np.ndarray]
    to_sets: tuple[tuple[int, ...], ...]          # distinct multicast destinations (cores)
    passes: tuple[tuple[int, int, str, int | None], ...]  # distinct (rows, k, dtype, cols) of matmuls
    bounds: np.ndarray                          # [3, instructions]
    toks: np.ndarray
    tokens: tuple[str, ...]

    def all_waits_signalled(self) -> bool:
        """Whether every token waited on is signalled by some instruction (else a run deadlocks)."""
        starts, mids, _ = self.bounds
        size = self.toks.size + 1  # +1 where an instruction's waits start, -1 where they end
        is_wait = np.cumsum(np.bincount(starts, minlength=size) - np.bincount(mids, minlength=size))[:-1] > 0
        signalled = np.zeros(len(self.tokens), bool)
        signalled[self.toks[~is_wait]] = True
        return bool(signalled[self.toks[is_wait]].all())


def build_columns(streams: dict[tuple[int, str], tuple[Instruction, ...]]) -> Columns:
    to_sets: dict[tuple[int, ...], int] = {}
    passes: dict[tuple, int] = {}
    instructions = tuple(ins for stream in streams.values() for ins in stream)
    which, distinct = _distinct(instructions, to_sets, passes)
    table = np.array(distinct, np.int64).reshape(-1, 1 + ARG_COLS)[np.array(which, np.int64)]
    op_col = table[:, 0].copy()
    token_id, toks, bounds = _tokens(instructions)
    keys = list(streams)
    return Columns(
        instructions=instructions,
        stream_core=np.array([core for core, _ in keys], np.int64),
        stream_slot=np.array([CORE_UNITS.index(u) if u in CORE_UNITS else HOST_SLOT for _, u in keys], np.int64),
        stream_len=np.array([len(s) for s in streams.values()], np.int64),
        op=op_col, args=table[:, 1:].T.copy(),
        rows={Op(int(o)): np.flatnonzero(op_col == o) for o in np.unique(op_col)},
        to_sets=tuple(to_sets), passes=tuple(passes), bounds=bounds, toks=toks, tokens=tuple(token_id))


def _distinct(instructions: tuple[Instruction, ...], to_sets: dict, passes: dict
              ) -> tuple[list[int], list[tuple[int, ...]]]:
    """Each instruction's row in a table of distinct encodings (op, then its ``args`` columns). An args
    dict is encoded once, by its op and identity: instructions with equal args share one dict
    (load._stream; a split-K program has 162,496 instructions and 8,732 distinct args), and the
    instructions keep every dict alive, so no id is reused meanwhile."""
    index: dict[tuple[str, int], int] = {}
    which, distinct = [], []
    for ins in instructions:
        key = (ins.op, id(ins.args))
        row = index.get(key)
        if row is None:
            row = index[key] = len(distinct)
            op, cols = _args(ins, to_sets, passes)
            distinct.append((op, *cols))
        which.append(row)
    return which, distinct


def _tokens(instructions: tuple[Instruction, ...]) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Token numbers in order of first use, every instruction's waits then signals as numbers, and the
    ``bounds``: one lookup per name, all in C (a name seen first takes the next number), not a Python
    loop per instruction."""
    names = list(chain.from_iterable(chain(ins.wait, ins.signal) for ins in instructions))
    token_id: defaultdict[str, int] = defaultdict(count().__next__)
    toks = np.fromiter(map(token_id.__getitem__, names), np.int64, len(names))
    waits = np.fromiter(map(len, (ins.wait for ins in instructions)), np.int64, len(instructions))
    signals = np.fromiter(map(len, (ins.signal for ins in instructions)), np.int64, len(instructions))
    ends = np.cumsum(waits + signals)
    starts = ends - waits - signals
    return token_id, toks, np.stack([starts, starts + waits, ends])


def _args(ins: Instruction, to_sets: dict, passes: dict) -> tuple[int, tuple[int, ...]]:
    """(op, its columns of ``args``, all ARG_COLS of them)."""
    a = ins.args
    if ins.op in SFU_OPS:
        return Op.SFU, (SFU_OPS[ins.op].code, a["a"] == "fifo", a["out"] == "fifo", a["sticks"], 0, 0)
    op = OP_OF[ins.op]
    if op in DMA_OPS:
        piece = a.get("piece", a["bytes"])
        to = to_sets.setdefault(a["to"], len(to_sets)) if "to" in a else -1
        return op, (a["dram"], a.get("lx", 0), a["bytes"], piece, a.get("stride", piece), to)
    if op == Op.SEND:
        return op, (a["lx"], a["to_core"], a["bytes"], 0, 0, 0)
    if op in (Op.LX2FIFO, Op.FIFO2LX):
        return op, (a["bytes"], 0, 0, 0, 0, 0)
    shape = (a["rows"], a["k"], a.get("dtype", "fp16"), a.get("cols"))
    return op, (passes.setdefault(shape, len(passes)), matmul_repeat(a), 0, 0, 0, 0)
