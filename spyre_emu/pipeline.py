"""run(): load -> (lower) -> simulate -> (replay) -> report. The one place that chains the stages."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np

from . import memo
from .config import Machine
from .engine import DEFAULT_MAX_CYCLES, EventLog, Progress, simulate
from .engine.functional import replay
from .errors import ProgramError
from .host_data import buffer_inputs, buffer_outputs, tensor_inputs, tensor_outputs
from .kernel_program import FORMAT as KERNEL_FORMAT
from .kernel_program import KernelProgram, Tensor, parse_kernel_program
from .lowering import lower
from .pool import parallel_map
from .results import Report, build_report
from .unit_program import UnitProgram
from .unit_program.load import FORMAT as UNIT_FORMAT
from .unit_program.load import parse_unit_program, read_json


@dataclass(frozen=True)
class Program:
    """What runs: the unit program, and for a kernel program the tensors it was lowered from,
    each kernel's op (for the report) and the digest of the kernel program (``lowered``)."""

    units: UnitProgram
    tensors: dict[str, Tensor] = field(default_factory=dict)
    kernel_ops: dict[str, str] = field(default_factory=dict)
    kernels_digest: bytes = b""


@dataclass(frozen=True)
class RunResult:
    report: Report
    log: EventLog
    outputs: dict[str, np.ndarray] = field(default_factory=dict)       # name -> host array
    output_files: dict[str, Path] = field(default_factory=dict)        # name -> file to write it to


def load(path: str | Path, machine: Machine) -> Program:
    """Load a unit program or a kernel program (lowered here), by its ``format`` tag."""
    return parse(read_json(Path(path)), machine, str(path))


def parse(data: object, machine: Machine, source: str) -> Program:
    """A program's JSON data, by its ``format`` tag: a unit program as it is, a kernel program lowered."""
    tag = data.get("format") if isinstance(data, dict) else None
    if tag == UNIT_FORMAT:
        return Program(parse_unit_program(data, machine, source))
    if tag == KERNEL_FORMAT:
        kernels = parse_kernel_program(data, source)
        return lowered(kernels, machine, {k.name: k.op for k in kernels.kernels})
    raise ProgramError(f"unknown program format {tag!r}; expected {UNIT_FORMAT!r} or {KERNEL_FORMAT!r}",
                       source, "format")


def load_program(path: str | Path, machine: Machine) -> UnitProgram:
    """The unit program of any program file (kernel programs are lowered)."""
    return load(path, machine).units


def lowered(kernels: KernelProgram, machine: Machine, kernel_ops: dict[str, str] | None = None,
            cache: bool = True) -> Program:
    """``kernels`` lowered, or its unit program from the cache, stored there with its result (``_store``).
    Lowering is a deterministic function of the parsed kernel program (every field, its source name
    included) and the machine, and memo.key covers the lowering's code: so these key the unit program,
    and with the cycle limit and the ops its result (``_key``), which a hit reads without lowering.
    ``cache=False`` (the front end's option) lowers without looking."""
    digest = memo.digest(kernels)
    units = memo.lookup(_units_key(digest, machine)) if cache else None
    if units is None:
        with memo.collector_paused():
            units = lower(kernels, machine)
    return Program(units, kernels.tensors, kernel_ops or {}, digest)


def run(program: UnitProgram | Program, machine: Machine, functional: bool = False,
        inputs: dict[str, Path | np.ndarray] | None = None, max_cycles: int = DEFAULT_MAX_CYCLES,
        progress: Progress | None = None, cache: bool = True) -> RunResult:
    """Simulate; with ``functional``, also compute the outputs. A kernel program's ``inputs`` may be
    .npy paths or host arrays (the torch front end passes arrays). ``progress`` is called now and
    then during the simulation (engine.simulate). With ``cache``, a program simulated before (in this
    process or, through the disk, another) is not simulated again (memo.py)."""
    if isinstance(program, UnitProgram):
        program = Program(program)
    log, report = timing(program, machine, max_cycles, progress) if cache else _simulate(
        program, machine, max_cycles, progress)
    result = RunResult(report, log)
    return with_outputs(program, machine, result, inputs) if functional else result


def with_outputs(program: Program, machine: Machine, result: RunResult,
                 inputs: dict[str, Path | np.ndarray] | None = None) -> RunResult:
    """``result`` (the timed run of ``program``) with its outputs computed: the timed instructions
    replayed on real bytes (the timing does not depend on the data)."""
    units, log = program.units, result.log
    if program.tensors:
        constants = buffer_inputs(units, {})  # buffers the lowering added (e.g. 1/n for mean)
        card = replay(units, log, machine, {**constants, **tensor_inputs(units, program.tensors, inputs or {})})
        outputs = tensor_outputs(card, units, program.tensors)
    else:
        card = replay(units, log, machine, buffer_inputs(units, inputs or {}))
        outputs = buffer_outputs(card, units)
    return RunResult(result.report, log, {n: a for n, (_, a) in outputs.items()},
                     {n: f for n, (f, _) in outputs.items()})


LOG_FIELDS = [f.name for f in fields(EventLog) if f.name != "instructions"]  # the program's own, not stored
POOL_MIN_INSTRUCTIONS = 20_000  # about a second of simulation: below it, starting workers costs more than it saves
Entry = tuple[dict[str, Any], dict[str, Any]]  # a run's event log (without its instructions) and report data


def timing(program: Program, machine: Machine, max_cycles: int = DEFAULT_MAX_CYCLES,
           progress: Progress | None = None) -> tuple[EventLog, Report]:
    """The event log and report of ``program``, from the result cache when it holds them."""
    k = _key(program, machine, max_cycles)
    entry = memo.lookup(k)
    if entry is None:
        log, report = _simulate(program, machine, max_cycles, progress)
        entry = _arrays(log), report.data
        _store(program, machine, k, entry)
    return _unpack(program, entry)


def timings(programs: list[Program], machine: Machine, cache: bool = True) -> list[tuple[EventLog, Report]]:
    """The logs and reports of independent programs: cached ones from the cache, the others
    simulated side by side in the process pool (pool.py). A program listed more than once (the
    same object: the front end's launches of identical layers) is keyed and simulated once. The largest
    programs go to the pool first: a worker taking a layer's attention last would run on alone."""
    unique = list({id(p): p for p in programs}.values())
    keys = [_key(p, machine, DEFAULT_MAX_CYCLES) for p in unique]
    entries = [memo.lookup(k) if cache else None for k in keys]
    sizes = [len(p.units.columns.instructions) for p in unique]
    missing = sorted((i for i, e in enumerate(entries) if e is None), key=lambda i: -sizes[i])
    jobs = [(unique[i], machine) for i in missing]
    size = sum(sizes[i] for i in missing)
    with memo.collector_paused():  # pickling the jobs makes objects, not garbage: no full collection (speed.md)
        done = parallel_map(_entry, jobs) if size >= POOL_MIN_INSTRUCTIONS else [_entry(job) for job in jobs]
    for i, entry in zip(missing, done, strict=True):
        entries[i] = entry
        if cache:
            _store(unique[i], machine, keys[i], entry)
    results = {id(p): _unpack(p, e) for p, e in zip(unique, entries, strict=True)}
    return [results[id(p)] for p in programs]


def _key(program: Program, machine: Machine, max_cycles: int) -> str:
    """Each unit program starts on a card in its reset state (engine.pack builds every array afresh):
    no engine state crosses from one program to the next, so a program's log depends only on what
    the key covers: its buffers, every instruction (with its tokens, kernel tag and JSON path), its
    source name, the machine (the repr of its frozen dataclasses, every field), the cycle limit,
    the kernel ops named in the report, and the simulator's code (memo.key). A lowered program's
    kernel program stands for its unit program (``lowered``)."""
    units = program.units
    content = program.kernels_digest or memo.digest((units.source, units.buffers, units.streams))
    return memo.key(content, repr(machine).encode(), repr((max_cycles, sorted(program.kernel_ops.items()))).encode())


def _units_key(kernels_digest: bytes, machine: Machine) -> str:
    return memo.key(b"lowered", kernels_digest, repr(machine).encode())


def _store(program: Program, machine: Machine, k: str, entry: Entry) -> None:
    """A result, and a lowered program's unit program beside it, so that a hit needs no lowering."""
    memo.store(k, entry)
    if program.kernels_digest:
        memo.store(_units_key(program.kernels_digest, machine), program.units)


def _entry(job: tuple[Program, Machine]) -> Entry:
    """What a pool worker sends back: the log's arrays and the report, not the program it was given."""
    log, report = _simulate(*job, DEFAULT_MAX_CYCLES, None)
    return _arrays(log), report.data


def _arrays(log: EventLog) -> dict[str, Any]:
    return {name: getattr(log, name) for name in LOG_FIELDS}


def _unpack(program: Program, entry: Entry) -> tuple[EventLog, Report]:
    arrays, data = entry
    return EventLog(instructions=program.units.columns.instructions, **arrays), Report(data)


def _simulate(program: Program, machine: Machine, max_cycles: int,
              progress: Progress | None) -> tuple[EventLog, Report]:
    with memo.collector_paused():
        log = simulate(program.units, machine, max_cycles, progress=progress)
        return log, build_report(log, machine, program.units.source, program.kernel_ops)
