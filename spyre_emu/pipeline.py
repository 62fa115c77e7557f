"""run(): load -> simulate -> (replay) -> report. The one place that chains the stages."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import DTYPE_BYTES, Machine
from .engine import DEFAULT_MAX_CYCLES, EventLog, simulate
from .engine.functional import replay
from .errors import ProgramError
from .numerics import from_f32, numpy_dtype
from .results import Report, build_report
from .unit_program import UnitProgram
from .unit_program.load import FORMAT, parse_unit_program, read_json


@dataclass(frozen=True)
class RunResult:
    report: Report
    log: EventLog
    outputs: dict[str, np.ndarray] = field(default_factory=dict)


def load_program(path: str | Path, machine: Machine) -> UnitProgram:
    """Load a program file by its ``format`` tag."""
    data = read_json(Path(path))
    tag = data.get("format") if isinstance(data, dict) else None
    if tag != FORMAT:
        raise ProgramError(f"unknown program format {tag!r}; expected {FORMAT!r}", str(path), "format")
    return parse_unit_program(data, machine, str(path))


def run(program: UnitProgram, machine: Machine, functional: bool = False,
        inputs: dict[str, Path] | None = None, max_cycles: int = DEFAULT_MAX_CYCLES) -> RunResult:
    log = simulate(program, machine, max_cycles)
    report = build_report(log, machine, program.source)
    if not functional:
        return RunResult(report, log)
    card = replay(program, log, machine, _input_bytes(program, inputs or {}))
    outputs = {}
    for buf in program.buffers.values():
        if buf.output is not None:
            raw = card.dram.read(buf.addr, buf.nbytes)
            count = int(np.prod(buf.shape)) if buf.shape else buf.nbytes // DTYPE_BYTES[buf.dtype]
            values = raw[:count * DTYPE_BYTES[buf.dtype]].view(numpy_dtype(buf.dtype))
            outputs[buf.name] = values.reshape(buf.shape) if buf.shape else values
    return RunResult(report, log, outputs)


def _input_bytes(program: UnitProgram, overrides: dict[str, Path]) -> dict[str, np.ndarray]:
    """Bytes of every buffer that has an input file (or a ``fill``), checked against its declaration."""
    out = {}
    for name in overrides:
        if name not in program.buffers:
            raise ProgramError(f"--input names unknown buffer {name!r}", program.source)
    for buf in program.buffers.values():
        path = overrides.get(buf.name, buf.input)
        where = f"buffers.{buf.name}.input"
        if path is None:
            if buf.fill == "random":
                rng = np.random.default_rng(int.from_bytes(hashlib.sha256(buf.name.encode()).digest()[:8]))
                count = buf.nbytes // DTYPE_BYTES[buf.dtype]
                out[buf.name] = from_f32(rng.standard_normal(count).astype(np.float32), buf.dtype)
            continue
        try:
            array = np.load(path, allow_pickle=False)
        except OSError as exc:
            raise ProgramError(f"cannot read input {str(path)!r}: {exc.strerror}", program.source, where) from None
        except (ValueError, EOFError) as exc:  # not a .npy file, truncated, or pickled objects
            raise ProgramError(f"cannot read input {str(path)!r}: {exc}", program.source, where) from None
        if not isinstance(array, np.ndarray):  # an .npz archive
            array.close()
            raise ProgramError(f"input {str(path)!r} is not a single .npy array", program.source, where)
        if array.dtype != np.dtype(numpy_dtype(buf.dtype)):
            raise ProgramError(f"input {str(path)!r} has dtype {array.dtype}, buffer is {buf.dtype}",
                               program.source, where)
        raw = np.ascontiguousarray(array).view(np.uint8).reshape(-1)
        if raw.size > buf.nbytes:
            raise ProgramError(f"input {str(path)!r} has {raw.size} B, buffer holds {buf.nbytes} B",
                               program.source, where)
        out[buf.name] = raw
    return out
