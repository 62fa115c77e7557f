"""JSON -> UnitProgram: schema check, symbol resolution, alignment, bounds and token checks.

Everything the engine would otherwise trip over is caught here and reported as one
ProgramError naming the file and the JSON path (``cores[0].units.load[3].bytes``).
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import fastjsonschema
import jsonschema

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..errors import ProgramError
from ..files import output_name, program_input, read_bytes
from ..numerics import value_range
from .model import HOST_CORE, Buffer, Instruction, UnitProgram, dram_span, matmul_a_sticks
from .opcodes import CORE_UNITS, HOST_UNIT, SFU_OPERANDS, SFU_OPS, UNIT_OPS, unit_kind

FORMAT = "spyre-emu.unit-program"
BUFFER_ALIGN_BYTES = 4096  # the runtime aligns DRAM allocations to whole bursts: assumed
MAX_SFU_STICKS = 1 << 40  # keeps an SFU op's cycle count far inside the engine's int64
MAX_MULTICAST_STOPS = 62  # the engine keeps a multicast's destination stops as bits of one int64


def _is_integer(checker: Any, instance: Any) -> bool:
    """A JSON integer; the draft's "integer" also accepts 128.0, which would reach the engine as a float."""
    return isinstance(instance, int) and not isinstance(instance, bool)


StrictValidator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator,
    type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))


@cache
def schema() -> dict[str, Any]:
    return json.loads(resources.files(__package__).joinpath("schema.json").read_text())


@cache
def _validators() -> tuple[Any, Any, dict[str, Any]]:
    """The envelope validator (streams only need to be arrays), the op check, one per op.

    Validating each instruction against its own op's definition is the same check as the
    schema's ``oneOf``, with errors that name the field.
    """
    full = schema()
    loose = {k: v for k, v in full["$defs"]["instruction"].items() if k != "oneOf"}
    envelope = {**full, "$defs": {**full["$defs"], "stream": {"type": "array"}}}  # items: checked one by one
    per_op = {}
    for name, spec in full["$defs"].items():
        if name.startswith("op_"):
            validator = StrictValidator({"$defs": full["$defs"], **spec})
            op = spec["properties"]["op"]
            for code in op.get("enum", [op.get("const")]):
                per_op[code] = validator
    return StrictValidator(envelope), StrictValidator(loose), per_op


def _inline_refs(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if set(node) == {"$ref"}:
            return _inline_refs(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {k: _inline_refs(v, defs) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_refs(v, defs) for v in node]
    return node


@cache
def _fast_validators() -> dict[str, Any]:
    """Per op, the same definition compiled to Python by fastjsonschema (~30x faster).

    It only answers "valid or not"; any instruction it rejects is checked again by jsonschema
    for the message. Floats never reach it: no instruction field is a float, and draft-07
    would accept 1.0 as an integer where ours must not.
    """
    defs = schema()["$defs"]
    out = {}
    for name, spec in defs.items():
        if name.startswith("op_"):
            check = fastjsonschema.compile({"$schema": "http://json-schema.org/draft-07/schema#",
                                            **_inline_refs(spec, defs)})
            op = spec["properties"]["op"]
            for code in op.get("enum", [op.get("const")]):
                out[code] = check
    return out


def _fast_valid(item: dict[str, Any]) -> bool:
    values = [v for value in item.values() for v in (value if isinstance(value, list) else [value])]
    if any(isinstance(v, float) for v in values):
        return False
    try:
        _fast_validators()[item["op"]](item)
    except fastjsonschema.JsonSchemaValueException:
        return False
    return True


def _check_schema(data: Any, source: str) -> None:
    envelope, has_op, per_op = _validators()
    error = jsonschema.exceptions.best_match(envelope.iter_errors(data))
    if error is not None:
        raise ProgramError(error.message, source, json_path(error.absolute_path))
    streams = [(f"cores[{i}].units.{unit}", items) for i, core in enumerate(data["cores"])
               for unit, items in core["units"].items()]
    for where, items in [*streams, ("host", data.get("host", []))]:
        for j, item in enumerate(items):
            known = isinstance(item, dict) and isinstance(item.get("op"), str) and item["op"] in per_op
            if known and _fast_valid(item):
                continue
            check = per_op[item["op"]] if known else has_op
            error = jsonschema.exceptions.best_match(check.iter_errors(item))
            if error is not None:
                raise ProgramError(error.message, source, f"{where}[{j}]" + (
                    "." + json_path(error.absolute_path) if error.absolute_path else ""))


def read_json(path: Path) -> Any:
    """Parse a JSON file; a read or syntax problem becomes a one-line ProgramError."""
    try:
        return json.loads(read_bytes(path).decode("utf-8"))
    except OSError as exc:
        raise ProgramError(f"cannot read: {exc.strerror}", str(path)) from None
    except RecursionError:
        raise ProgramError("invalid JSON: nested too deeply", str(path)) from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of too many digits
        raise ProgramError(f"invalid JSON: {exc}", str(path)) from None


def load_unit_program(path: str | Path, machine: Machine) -> UnitProgram:
    path = Path(path)
    return parse_unit_program(read_json(path), machine, str(path))


def json_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def parse_unit_program(data: Any, machine: Machine, source: str = "<program>") -> UnitProgram:
    _check_schema(data, source)
    base = Path(source).parent
    buffers = _allocate(data.get("buffers", {}), machine, source, base)
    streams: dict[tuple[int, str], tuple[Instruction, ...]] = {}
    seen_cores: set[int] = set()
    for i, core in enumerate(data["cores"]):
        where = f"cores[{i}]"
        if core["core"] >= machine.cores.count:
            raise ProgramError(f"core {core['core']} does not exist (the card has {machine.cores.count})",
                               source, where + ".core")
        if core["core"] in seen_cores:
            raise ProgramError(f"core {core['core']} is listed twice", source, where + ".core")
        seen_cores.add(core["core"])
        for unit in CORE_UNITS:
            if unit in core["units"]:
                streams[(core["core"], unit)] = _stream(
                    core["units"][unit], core["core"], unit, f"{where}.units.{unit}", buffers, machine, source)
    if data.get("host"):
        streams[(HOST_CORE, HOST_UNIT)] = _stream(data["host"], HOST_CORE, HOST_UNIT, "host", buffers,
                                                   machine, source)
    _check_tokens(streams, source)
    ordered = dict(sorted(streams.items(), key=lambda kv: (kv[0][0] < 0, kv[0][0],
                                                          _unit_order(kv[0][1]))))
    return UnitProgram(source, buffers, ordered)


def _unit_order(unit: str) -> int:
    return CORE_UNITS.index(unit) if unit in CORE_UNITS else len(CORE_UNITS)


def _allocate(raw: dict[str, Any], machine: Machine, source: str, base: Path) -> dict[str, Buffer]:
    """Place buffers one after another in DRAM, each aligned to a whole burst."""
    buffers: dict[str, Buffer] = {}
    fixed = _fixed_addresses(raw, machine, source)
    addr = 0
    for name, spec in raw.items():
        nbytes = spec["bytes"]
        where = f"buffers.{name}"
        if nbytes % STICK_BYTES:
            raise ProgramError(f"must be a whole number of {STICK_BYTES} B sticks", source, where + ".bytes")
        if name in fixed:
            at = spec["addr"]
        else:
            at = addr = _next_free(addr, nbytes, fixed)
            addr += -(-nbytes // BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES
        if at + nbytes > machine.dram.size_bytes:
            raise ProgramError("does not fit in device memory", source, where + ".bytes")
        if "output" in spec and spec["output"] in [b.output and str(b.output) for b in buffers.values()]:
            raise ProgramError(f"output {spec['output']!r} is already written by another buffer", source,
                               where + ".output")
        shape = tuple(spec["shape"]) if "shape" in spec else None
        dtype = spec.get("dtype", "fp16")
        if shape is not None and _prod(shape) * DTYPE_BYTES[dtype] > nbytes:
            raise ProgramError(f"shape {list(shape)} of {dtype} needs more than {nbytes} B", source,
                               where + ".shape")
        buffers[name] = Buffer(name, at, nbytes, dtype, shape,
                               program_input(base, spec["input"], source, where + ".input") if "input" in spec
                               else None,
                               output_name(spec["output"], source, where + ".output") if "output" in spec else None,
                               _fill(spec.get("fill", "zeros"), dtype, source, where + ".fill"))
    return buffers


def _fixed_addresses(raw: dict[str, dict[str, Any]], machine: Machine, source: str) -> dict[str, tuple[int, int]]:
    """The buffers placed by ``addr``: (start, end), aligned and not overlapping one another."""
    fixed: dict[str, tuple[int, int]] = {}
    for name, spec in raw.items():
        if "addr" not in spec:
            continue
        start, end = spec["addr"], spec["addr"] + spec["bytes"]
        if start % STICK_BYTES:
            raise ProgramError(f"address {start} is not a multiple of {STICK_BYTES} B", source, f"buffers.{name}.addr")
        clash = [other for other, (s, e) in fixed.items() if s < end and start < e]
        if clash:
            raise ProgramError(f"overlaps buffer {clash[0]!r}", source, f"buffers.{name}.addr")
        fixed[name] = (start, end)
    return fixed


def _next_free(addr: int, nbytes: int, fixed: dict[str, tuple[int, int]]) -> int:
    """The first aligned address from ``addr`` where ``nbytes`` miss every fixed buffer."""
    moved = True
    while moved:
        moved = False
        for start, end in fixed.values():
            if start < addr + nbytes and addr < end:
                addr, moved = -(-end // BUFFER_ALIGN_BYTES) * BUFFER_ALIGN_BYTES, True
    return addr


def _fill(value: str | float | list[float], dtype: str, source: str, where: str) -> str | float | tuple[float, ...]:
    """A fill goes through float32 to ``dtype``: a value that does not fit would turn into inf or garbage."""
    lo, hi = value_range(dtype)
    for v in [] if isinstance(value, str) else value if isinstance(value, list) else [value]:
        if not lo <= v <= hi:
            raise ProgramError(f"fill value {v} is outside the {dtype} range [{lo:g}, {hi:g}]", source, where)
    return tuple(value) if isinstance(value, list) else value


def _prod(shape: tuple[int, ...]) -> int:
    out = 1
    for n in shape:
        out *= n
    return out


def _stream(raw: list[dict[str, Any]], core: int, unit: str, where: str, buffers: dict[str, Buffer],
            machine: Machine, source: str) -> tuple[Instruction, ...]:
    out = []
    for j, item in enumerate(raw):
        path = f"{where}[{j}]"
        op = item["op"]
        if op not in UNIT_OPS[unit_kind(unit)]:
            raise ProgramError(f"op {op!r} cannot run on unit {unit!r}", source, path + ".op")
        args = {k: v for k, v in item.items() if k not in ("op", "wait", "signal", "note", "kernel")}
        if "to" in args:
            args["to"] = tuple(args["to"])  # instructions are compared and hashed by their args
        if "piece" in args or "stride" in args:
            _check_pieces(args, path, source)
        if "dram" in args:
            args["dram"] = _resolve_dram(args["dram"], dram_span(args), buffers, machine, source, path)
        ins = Instruction(core, unit, op, args, tuple(item.get("wait", ())),
                          tuple(item.get("signal", ())), path, item.get("kernel", ""))
        _check_regions(ins, machine, source)
        out.append(ins)
    return tuple(out)


def _resolve_dram(ref: int | str, nbytes: int, buffers: dict[str, Buffer], machine: Machine,
                  source: str, path: str) -> int:
    where = path + ".dram"
    if isinstance(ref, str):
        name, _, digits = ref.partition("+")
        if name not in buffers:
            raise ProgramError(f"unknown buffer {name!r}", source, where)
        buf = buffers[name]
        # more than 20 digits is past any buffer (and int() refuses more than 4300)
        offset = int(digits or 0) if len(digits) <= 20 else buf.nbytes + 1
        if offset + nbytes > buf.nbytes:
            raise ProgramError(f"{ref}..+{nbytes} B runs past the end of buffer {name!r} "
                               f"({buf.nbytes} B)", source, where)
        addr = buf.addr + offset
    else:
        addr = ref
    if addr % STICK_BYTES:
        raise ProgramError(f"address {addr} is not a multiple of {STICK_BYTES} B", source, where)
    if addr + nbytes > machine.dram.size_bytes:
        raise ProgramError(f"address {addr}..+{nbytes} B is outside device memory", source, where)
    return addr


def lx_regions(ins: Instruction, machine: Machine) -> list[tuple[str, int, int]]:
    """(field, offset, bytes) of every LX range the instruction touches on its own core."""
    a = ins.args
    if ins.op in ("load", "store", "lx2fifo", "fifo2lx", "send"):
        return [("lx", a["lx"], a["bytes"])]
    if ins.op == "matmul":
        db = DTYPE_BYTES[a.get("dtype", "fp16")]
        cols = a.get("cols", machine.pt.cols_per_pass)
        per_row, k_stride, row_stride = matmul_a_sticks(a, db)
        a_span = ((per_row - 1) * k_stride + (a["rows"] - 1) * row_stride + 1) * STICK_BYTES
        return [("a", a["a"], a_span), ("b", a["b"], _sticks(a["k"] * cols * db) * STICK_BYTES),
                ("c", a["c"], a["rows"] * _sticks(cols * 2) * STICK_BYTES)]
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


def _check_regions(ins: Instruction, machine: Machine, source: str) -> None:
    a = ins.args
    if "bytes" in a and a["bytes"] % STICK_BYTES:
        raise ProgramError(f"{a['bytes']} is not a whole number of {STICK_BYTES} B sticks", source,
                           ins.path + ".bytes")
    if ins.op in SFU_OPS:
        _check_sfu(ins, source)
    if ins.op == "matmul" and not machine.pt.plain:  # a plain array takes a GEMM of any shape
        if a["rows"] > machine.pt.rows_per_pass:
            raise ProgramError(f"a PT pass has at most {machine.pt.rows_per_pass} rows", source, ins.path + ".rows")
        if a.get("cols", 0) > machine.pt.cols_per_pass:
            raise ProgramError(f"a PT pass has at most {machine.pt.cols_per_pass} columns", source,
                               ins.path + ".cols")
    if ins.op == "matmul" and a.get("dtype", "fp16") not in machine.pt.lanes:
        raise ProgramError(f"the machine's PT array has no {a.get('dtype', 'fp16')} lanes (see [pt.lanes])",
                           source, ins.path + (".dtype" if "dtype" in a else ""))
    if ins.op == "load" and "to" in a:
        _check_multicast(ins, machine, source)
    if ins.op == "send":
        if a["to_core"] >= machine.cores.count or a["to_core"] == ins.core:
            raise ProgramError(f"to_core must be another core of the card (0..{machine.cores.count - 1})",
                               source, ins.path + ".to_core")
        _check_lx(ins.path + ".to_lx", a["to_lx"], a["bytes"], machine, source)
    for field, offset, nbytes in lx_regions(ins, machine):
        _check_lx(f"{ins.path}.{field}", offset, nbytes, machine, source)


def _check_pieces(a: dict[str, Any], path: str, source: str) -> None:
    """A strided load or store: whole-stick pieces that divide its bytes, no two overlapping."""
    for field, other in (("piece", "stride"), ("stride", "piece")):
        if field not in a:
            raise ProgramError(f"a strided transfer needs both piece and stride; {other} alone given", source,
                               path)
    if a["piece"] % STICK_BYTES or a["bytes"] % a["piece"]:
        raise ProgramError(f"must be whole {STICK_BYTES} B sticks that divide bytes ({a['bytes']})", source,
                           path + ".piece")
    if a["stride"] < a["piece"] or a["stride"] % STICK_BYTES:
        raise ProgramError(f"must be whole {STICK_BYTES} B sticks, at least piece ({a['piece']})", source,
                           path + ".stride")


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


def _check_sfu(ins: Instruction, source: str) -> None:
    spec, a = SFU_OPS[ins.op], ins.args
    if a["sticks"] > MAX_SFU_STICKS:
        raise ProgramError(f"at most {MAX_SFU_STICKS} sticks in one instruction", source, ins.path + ".sticks")
    for i, field in enumerate(SFU_OPERANDS[1:], start=1):
        if (spec.arity > i) != (field in a):
            need = f"needs operand {field!r}" if spec.arity > i else f"takes no operand {field!r}"
            raise ProgramError(f"{ins.op} {need}", source, ins.path)
    for field in SFU_OPERANDS:
        if f"{field}_broadcast" in a and (field not in a or a[field] == "fifo"):
            raise ProgramError(f"{field}_broadcast needs operand {field!r} in LX", source,
                               f"{ins.path}.{field}_broadcast")
    if spec.shape != "map" and "fifo" in (a["a"], a["out"]):
        raise ProgramError(f"{ins.op} reads and writes LX, not a FIFO", source, ins.path)
    lanes = STICK_BYTES // DTYPE_BYTES[a.get("dtype", "fp16")]
    if spec.shape == "block" and a["sticks"] % lanes:
        raise ProgramError(f"{ins.op} works on blocks of {lanes} sticks of {a.get('dtype', 'fp16')}", source,
                           ins.path + ".sticks")


def _check_lx(where: str, offset: int, nbytes: int, machine: Machine, source: str) -> None:
    if offset % STICK_BYTES:
        raise ProgramError(f"LX offset {offset} is not a multiple of {STICK_BYTES} B", source, where)
    if offset + nbytes > machine.lx.size_bytes:
        raise ProgramError(f"LX range {offset}..+{nbytes} B is beyond the {machine.lx.size_bytes} B "
                           "scratchpad", source, where)


def _check_tokens(streams: dict[tuple[int, str], tuple[Instruction, ...]], source: str) -> None:
    signalled = {t for stream in streams.values() for ins in stream for t in ins.signal}
    for stream in streams.values():
        for ins in stream:
            for token in ins.wait:
                if token not in signalled:
                    raise ProgramError(f"waits on token {token!r} that no instruction signals "
                                       "(it would deadlock)", source, ins.path + ".wait")
