"""One instruction's checks: whole sticks, operands, PT pass limits, multicast destinations, strided
pieces and the LX ranges it touches. Each failure is a ProgramError naming the JSON path."""

from __future__ import annotations

from typing import Any

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..errors import ProgramError
from .model import STEPS, Instruction, lx_span, matmul_a_sticks, matmul_c_sticks, matmul_repeat
from .opcodes import CAST_SHAPES, SFU_OPERANDS, SFU_OPS

MAX_SFU_STICKS = 1 << 40  # keeps an SFU op's cycle count far inside the engine's int64
MAX_MULTICAST_STOPS = 62  # the engine keeps a multicast's destination stops as bits of one int64
CHECKED_PER_CORE = frozenset({"send"})  # the ops whose checks look at the instruction's core (to_core)


def lx_regions(ins: Instruction, machine: Machine) -> list[tuple[str, int, int]]:
    """(field, offset, bytes) of every LX range the instruction touches on its own core."""
    a = ins.args
    if ins.op in ("load", "store"):
        return [("lx", a["lx"], lx_span(a))]
    if ins.op in ("lx2fifo", "fifo2lx", "send"):
        return [("lx", a["lx"], a["bytes"])]
    if ins.op == "matmul":
        db = DTYPE_BYTES[a.get("dtype", "fp16")]
        cols = a.get("cols", machine.pt.cols_per_pass)
        per_row, k_stride, row_stride = matmul_a_sticks(a, db)
        a_span = ((per_row - 1) * k_stride + (a["rows"] - 1) * row_stride + 1) * STICK_BYTES
        b_span = ((a["k"] - 1) * a["b_k_stride"] + 1) * STICK_BYTES if "b_k_stride" in a \
            else _sticks(a["k"] * cols * db) * STICK_BYTES
        c_row, c_stride = matmul_c_sticks(a, cols)
        c_span = ((a["rows"] - 1) * c_stride + c_row) * STICK_BYTES
        more = matmul_repeat(a) - 1  # the later passes of a repeat, each moved on by its steps
        return [("a", a["a"], a_span + more * a.get("a_step", 0)), ("b", a["b"], b_span + more * a.get("b_step", 0)),
                ("c", a["c"], c_span + more * a.get("c_step", 0))]
    if ins.op in SFU_OPS:
        n = a["sticks"]
        out_sticks = 1 if SFU_OPS[ins.op].shape == "sticks" else n
        regions = [(f, a[f], STICK_BYTES if a.get(f"{f}_broadcast") else n * STICK_BYTES)
                   for f in SFU_OPERANDS if f in a]
        regions.append(("out", a["out"], out_sticks * STICK_BYTES))
        return [r for r in regions if r[1] != "fifo"]
    return []


def _sticks(nbytes: int) -> int:
    return -(-nbytes // STICK_BYTES)


def check_instruction(ins: Instruction, machine: Machine, source: str) -> None:
    """Sizes, operands and LX ranges of one instruction (its DRAM range is resolved by the loader). Run once per
    distinct instruction of a program (100,000s in a prefill layer): each op's own checks only, and an error's
    JSON path spelled out only when it is raised."""
    a = ins.args
    if "bytes" in a and a["bytes"] % STICK_BYTES:
        raise ProgramError(f"{a['bytes']} is not a whole number of {STICK_BYTES} B sticks", source,
                           ins.path + ".bytes")
    if ins.op in SFU_OPS:
        _check_sfu(ins, source)
    elif ins.op == "matmul":
        _check_matmul(ins, machine, source)
    elif ins.op == "load":
        if "to" in a:
            _check_multicast(ins, machine, source)
        if not a.keys().isdisjoint(INDEX_FIELDS):
            _check_indirect(ins, machine, source)
    elif ins.op == "send":
        if a["to_core"] >= machine.cores.count or a["to_core"] == ins.core:
            raise ProgramError(f"to_core must be another core of the card (0..{machine.cores.count - 1})",
                               source, ins.path + ".to_core")
        _check_lx(ins.path, "to_lx", a["to_lx"], a["bytes"], machine, source)
    for field, offset, nbytes in lx_regions(ins, machine):
        _check_lx(ins.path, field, offset, nbytes, machine, source)


def _check_matmul(ins: Instruction, machine: Machine, source: str) -> None:
    """A PT pass's shape within the array's, B and C strides that fit their rows, whole-stick steps, lanes of
    its dtype."""
    a = ins.args
    if not machine.pt.plain:  # a plain array takes a GEMM of any shape
        if a["rows"] > machine.pt.rows_per_pass:
            raise ProgramError(f"a PT pass has at most {machine.pt.rows_per_pass} rows", source, ins.path + ".rows")
        if a.get("cols", 0) > machine.pt.cols_per_pass:
            raise ProgramError(f"a PT pass has at most {machine.pt.cols_per_pass} columns", source,
                               ins.path + ".cols")
    row_bytes = a.get("cols", machine.pt.cols_per_pass) * DTYPE_BYTES[a.get("dtype", "fp16")]
    if "b_k_stride" in a and row_bytes != STICK_BYTES:
        raise ProgramError("b_k_stride needs B rows of one stick each (cols x dtype = 128 B)", source,
                           ins.path + ".b_k_stride")
    if "c_row_stride" in a and a["c_row_stride"] < matmul_c_sticks({}, a.get("cols", machine.pt.cols_per_pass))[0]:
        raise ProgramError("c_row_stride is less than a C row's sticks: C rows would overlap", source,
                           ins.path + ".c_row_stride")
    for step in STEPS:
        if a.get(step, 0) % STICK_BYTES:
            raise ProgramError(f"{a[step]} is not a whole number of {STICK_BYTES} B sticks", source,
                               f"{ins.path}.{step}")
    if a.get("dtype", "fp16") not in machine.pt.lanes:
        raise ProgramError(f"the machine's PT array has no {a.get('dtype', 'fp16')} lanes (see [pt.lanes])",
                           source, ins.path + (".dtype" if "dtype" in a else ""))


PATTERNS = (("piece", "stride"), ("lx_piece", "lx_stride"))  # a strided side of a load or store: DRAM, LX


def check_pieces(a: dict[str, Any], path: str, source: str) -> None:
    """A strided side of a load or store (DRAM: piece and stride; LX: lx_piece and lx_stride): whole-stick
    pieces that divide its bytes, no two overlapping."""
    for piece, stride in PATTERNS:
        if piece not in a and stride not in a:
            continue
        for field, other in ((piece, stride), (stride, piece)):
            if field not in a:
                raise ProgramError(f"a strided side needs both {piece} and {stride}; {other} alone given", source,
                                   path)
        if a[piece] % STICK_BYTES or a["bytes"] % a[piece]:
            raise ProgramError(f"must be whole {STICK_BYTES} B sticks that divide bytes ({a['bytes']})", source,
                               f"{path}.{piece}")
        if a[stride] < a[piece] or a[stride] % STICK_BYTES:
            raise ProgramError(f"must be whole {STICK_BYTES} B sticks, at least {piece} ({a[piece]})", source,
                               f"{path}.{stride}")


def _check_multicast(ins: Instruction, machine: Machine, source: str) -> None:
    """A multicast names cores of the card, at most ``dma.multicast_max_cores``; the engine keeps its
    destinations as a bit mask of ring stops."""
    to, where = ins.args["to"], ins.path + ".to"
    if len(to) > machine.dma.multicast_max_cores:
        raise ProgramError(f"a load feeds at most dma.multicast_max_cores = {machine.dma.multicast_max_cores} cores",
                           source, where)
    if max(to) >= machine.cores.count:
        raise ProgramError(f"cores are 0..{machine.cores.count - 1}", source, where)
    if len(machine.ring.stops) > MAX_MULTICAST_STOPS:
        raise ProgramError(f"multicast needs a ring of at most {MAX_MULTICAST_STOPS} stops", source, where)


INDEX_FIELDS = ("index_lx", "index_row", "index_rows", "index_pitch")


def _check_indirect(ins: Instruction, machine: Machine, source: str) -> None:
    """An indirect load names all four index fields, an int32 inside LX and a row of its table, and
    is not a multicast (its row is its own core's)."""
    a = ins.args
    missing = [f for f in INDEX_FIELDS if f not in a]
    if missing:
        raise ProgramError(f"an indirect load needs {', '.join(INDEX_FIELDS)}; {missing[0]} missing", source,
                           ins.path)
    if "to" in a:
        raise ProgramError("an indirect load reads its own core's index and cannot multicast", source, ins.path + ".to")
    if a["index_lx"] % 4 or not 0 <= a["index_lx"] <= machine.lx.size_bytes - 4:
        raise ProgramError(f"an int32 inside the {machine.lx.size_bytes} B scratchpad (a multiple of 4)", source,
                           ins.path + ".index_lx")
    if not 0 <= a["index_row"] < a["index_rows"]:
        raise ProgramError(f"a row of the table (0..{a['index_rows'] - 1})", source, ins.path + ".index_row")
    if a["index_pitch"] % STICK_BYTES:
        raise ProgramError(f"whole {STICK_BYTES} B sticks", source, ins.path + ".index_pitch")


def _check_sfu(ins: Instruction, source: str) -> None:
    spec, a = SFU_OPS[ins.op], ins.args
    if a["sticks"] > MAX_SFU_STICKS:
        raise ProgramError(f"at most {MAX_SFU_STICKS} sticks in one instruction", source, ins.path + ".sticks")
    for i, field in enumerate(SFU_OPERANDS[1:], start=1):
        if (spec.arity > i) != (field in a):
            need = f"needs operand {field!r}" if spec.arity > i else f"takes no operand {field!r}"
            raise ProgramError(f"{ins.op} {need}", source, ins.path)
    for flag in (f"{field}_{how}" for field in SFU_OPERANDS for how in ("broadcast", "splat")):
        field = flag.partition("_")[0]
        if flag in a and (field not in a or a[field] == "fifo"):
            raise ProgramError(f"{flag} needs operand {field!r} in LX", source, f"{ins.path}.{flag}")
    if spec.shape != "map" and "fifo" in (a["a"], a["out"]):
        raise ProgramError(f"{ins.op} reads and writes LX, not a FIFO", source, ins.path)
    _check_cast(ins, source)
    lanes = STICK_BYTES // DTYPE_BYTES[a.get("dtype", "fp16")]
    if spec.shape == "block" and a["sticks"] % lanes:
        raise ProgramError(f"{ins.op} works on blocks of {lanes} sticks of {a.get('dtype', 'fp16')}", source,
                           ins.path + ".sticks")


def _check_cast(ins: Instruction, source: str) -> None:
    """A cast names its output type, of twice (widen) or half (narrow) its operands' element width;
    any other op writes its operands' type."""
    a, ratio = ins.args, CAST_SHAPES.get(SFU_OPS[ins.op].shape)
    if ratio is None:
        if "out_dtype" in a:
            raise ProgramError(f"{ins.op} takes no out_dtype (only casts do)", source, ins.path + ".out_dtype")
        return
    if "out_dtype" not in a:
        raise ProgramError(f"{ins.op} needs out_dtype", source, ins.path)
    dtype = a.get("dtype", "fp16")
    if DTYPE_BYTES[a["out_dtype"]] != DTYPE_BYTES[dtype] * ratio:
        width = "twice" if ratio > 1 else "half"
        raise ProgramError(f"{ins.op} writes {width} the element width of its {dtype} operands, not "
                           f"{a['out_dtype']}", source, ins.path + ".out_dtype")


def _check_lx(path: str, field: str, offset: int, nbytes: int, machine: Machine, source: str) -> None:
    if offset % STICK_BYTES:
        raise ProgramError(f"LX offset {offset} is not a multiple of {STICK_BYTES} B", source, f"{path}.{field}")
    if offset + nbytes > machine.lx.size_bytes:
        raise ProgramError(f"LX range {offset}..+{nbytes} B is beyond the {machine.lx.size_bytes} B "
                           "scratchpad", source, f"{path}.{field}")
