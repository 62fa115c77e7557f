"""run(): load -> (lower) -> simulate -> (replay) -> report. The one place that chains the stages."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .config import Machine
from .engine import DEFAULT_MAX_CYCLES, EventLog, Progress, simulate
from .engine.functional import replay
from .errors import ProgramError
from .host_data import buffer_inputs, buffer_outputs, tensor_inputs, tensor_outputs
from .kernel_program import FORMAT as KERNEL_FORMAT
from .kernel_program import Tensor, parse_kernel_program
from .lowering import lower
from .results import Report, build_report
from .unit_program import UnitProgram
from .unit_program.load import FORMAT as UNIT_FORMAT
from .unit_program.load import parse_unit_program, read_json


@dataclass(frozen=True)
class Program:
    """What runs: the unit program, and for a kernel program the tensors it was lowered from and
    each kernel's op (for the report)."""

    units: UnitProgram
    tensors: dict[str, Tensor] = field(default_factory=dict)
    kernel_ops: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunResult:
    report: Report
    log: EventLog
    outputs: dict[str, np.ndarray] = field(default_factory=dict)       # name -> host array
    output_files: dict[str, Path] = field(default_factory=dict)        # name -> file to write it to


def load(path: str | Path, machine: Machine) -> Program:
    """Load a unit program or a kernel program (lowered here), by its ``format`` tag."""
    data = read_json(Path(path))
    tag = data.get("format") if isinstance(data, dict) else None
    if tag == UNIT_FORMAT:
        return Program(parse_unit_program(data, machine, str(path)))
    if tag == KERNEL_FORMAT:
        kernels = parse_kernel_program(data, str(path))
        return Program(lower(kernels, machine), kernels.tensors, {k.name: k.op for k in kernels.kernels})
    raise ProgramError(f"unknown program format {tag!r}; expected {UNIT_FORMAT!r} or {KERNEL_FORMAT!r}",
                       str(path), "format")


def load_program(path: str | Path, machine: Machine) -> UnitProgram:
    """The unit program of any program file (kernel programs are lowered)."""
    return load(path, machine).units


def run(program: UnitProgram | Program, machine: Machine, functional: bool = False,
        inputs: dict[str, Path | np.ndarray] | None = None, max_cycles: int = DEFAULT_MAX_CYCLES,
        progress: Progress | None = None) -> RunResult:
    """Simulate; with ``functional``, also compute the outputs. A kernel program's ``inputs`` may be
    .npy paths or host arrays (the torch front end passes arrays). ``progress`` is called now and
    then during the simulation (engine.simulate)."""
    if isinstance(program, UnitProgram):
        program = Program(program)
    units = program.units
    log = simulate(units, machine, max_cycles, progress=progress)
    report = build_report(log, machine, units.source, program.kernel_ops)
    if not functional:
        return RunResult(report, log)
    if program.tensors:
        constants = buffer_inputs(units, {})  # buffers the lowering added (e.g. 1/n for mean)
        card = replay(units, log, machine, {**constants, **tensor_inputs(units, program.tensors, inputs or {})})
        outputs = tensor_outputs(card, units, program.tensors)
    else:
        card = replay(units, log, machine, buffer_inputs(units, inputs or {}))
        outputs = buffer_outputs(card, units)
    return RunResult(report, log, {n: a for n, (_, a) in outputs.items()},
                     {n: f for n, (f, _) in outputs.items()})
