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
from .checks import CHECKED_PER_CORE, PATTERNS, check_instruction, check_pieces
from .columns import build_columns
from .model import HOST_CORE, Buffer, Instruction, UnitProgram, dram_span
from .opcodes import CORE_UNITS, HOST_UNIT, UNIT_OPS, unit_kind

FORMAT = "spyre-emu.unit-program"
PATTERN_FIELDS = frozenset(field for pair in PATTERNS for field in pair)
BUFFER_ALIGN_BYTES = 4096  # the runtime aligns DRAM allocations to whole bursts: assumed
Seen = dict[tuple, tuple[dict[str, Any], set[int | None]]]  # _stream's distinct args and the cores that checked them


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


def parse_unit_program(data: Any, machine: Machine, source: str = "<program>", schema: bool = True) -> UnitProgram:
    """``schema=False`` for the lowering's own output: its shape is the lowering's code, checked against
    the schema by the tests (tests/lowering/test_schema.py), so only the checks that need the machine,
    the buffers and the streams (addresses, LX regions, tokens) run on it; and its items, used by
    nothing else, become the instructions' args in place (``data`` is consumed)."""
    if schema:
        _check_schema(data, source)
    base = Path(source).parent
    buffers = _allocate(data.get("buffers", {}), machine, source, base)
    streams: dict[tuple[int, str], tuple[Instruction, ...]] = {}
    seen_cores: set[int] = set()
    seen: Seen = {}
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
                    core["units"][unit], core["core"], unit, f"{where}.units.{unit}", buffers, machine, source, seen,
                    not schema)
    if data.get("host"):
        streams[(HOST_CORE, HOST_UNIT)] = _stream(data["host"], HOST_CORE, HOST_UNIT, "host", buffers,
                                                   machine, source, seen, not schema)
    ordered = dict(sorted(streams.items(), key=lambda kv: (kv[0][0] < 0, kv[0][0],
                                                          _unit_order(kv[0][1]))))
    columns = build_columns(ordered)
    if not columns.all_waits_signalled():
        _check_tokens(streams, source)
    return UnitProgram(source, buffers, ordered, columns)


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
            machine: Machine, source: str, seen: Seen, owned: bool) -> tuple[Instruction, ...]:
    """``seen``: the distinct args so far, by (op, arg names, arg values), each with the cores on which an
    instruction with them passed check_instruction (None for all cores: only the checks of CHECKED_PER_CORE
    look at the core). Equal instructions share one args dict (build_columns encodes each dict once: a
    split-K program has 162,496 instructions but 8,732 distinct args), and check_instruction looks at
    nothing else but the machine (and, for those ops, the core), so an equal instruction passes again.
    ``owned``: the items are the lowering's own, used by nothing else, so each becomes its instruction's
    args in place instead of a copy."""
    out = []
    allowed = UNIT_OPS[unit_kind(unit)]
    for j, item in enumerate(raw):
        op, path = item["op"], f"{where}[{j}]"
        if op not in allowed:
            raise ProgramError(f"op {op!r} cannot run on unit {unit!r}", source, path + ".op")
        args = item if owned else dict(item)
        pop = args.pop
        del args["op"]
        wait, signal, kernel = tuple(pop("wait", ())), tuple(pop("signal", ())), pop("kernel", "")
        pop("note", None)
        if "to" in args:
            args["to"] = tuple(args["to"])  # instructions are compared and hashed by their args
        if not args.keys().isdisjoint(PATTERN_FIELDS):
            check_pieces(args, path, source)
        if "dram" in args:
            args["dram"] = _resolve_dram(args["dram"], dram_span(args), buffers, machine, source, path)
        key = (op, tuple(args), tuple(args.values()))
        known = seen.get(key)
        if known is None:
            known = seen[key] = (args, set())
        args, checked = known
        ins = Instruction(core, unit, op, args, wait, signal, path, kernel)
        who = core if op in CHECKED_PER_CORE else None
        if who not in checked:
            check_instruction(ins, machine, source)
            checked.add(who)
        out.append(ins)
    return tuple(out)


def _resolve_dram(ref: int | str, nbytes: int, buffers: dict[str, Buffer], machine: Machine,
                  source: str, path: str) -> int:
    """The address of ``ref`` (a buffer's name and offset, or an address), checked for ``nbytes`` from it; the
    instruction at ``path`` (its error's place, spelled out only when one is raised: a layer's lowering has
    100,000s of DMAs)."""
    if isinstance(ref, str):
        name, _, digits = ref.partition("+")
        if name not in buffers:
            raise ProgramError(f"unknown buffer {name!r}", source, path + ".dram")
        buf = buffers[name]
        # more than 20 digits is past any buffer (and int() refuses more than 4300)
        offset = int(digits or 0) if len(digits) <= 20 else buf.nbytes + 1
        if offset + nbytes > buf.nbytes:
            raise ProgramError(f"{ref}..+{nbytes} B runs past the end of buffer {name!r} "
                               f"({buf.nbytes} B)", source, path + ".dram")
        addr = buf.addr + offset
    else:
        addr = ref
    if addr % STICK_BYTES:
        raise ProgramError(f"address {addr} is not a multiple of {STICK_BYTES} B", source, path + ".dram")
    if addr + nbytes > machine.dram.size_bytes:
        raise ProgramError(f"address {addr}..+{nbytes} B is outside device memory", source, path + ".dram")
    return addr


def _check_tokens(streams: dict[tuple[int, str], tuple[Instruction, ...]], source: str) -> None:
    """Raise on the first wait, in the program's own order, on a token no instruction signals (run only
    when ``Columns.all_waits_signalled`` found one: a set of every name costs more than numpy over numbers)."""
    signalled = {t for stream in streams.values() for ins in stream for t in ins.signal}
    for stream in streams.values():
        for ins in stream:
            for token in ins.wait:
                if token not in signalled:
                    raise ProgramError(f"waits on token {token!r} that no instruction signals "
                                       "(it would deadlock)", source, ins.path + ".wait")
