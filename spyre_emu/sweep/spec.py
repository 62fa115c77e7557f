"""A sweep written as TOML (``spyre-emu sweep SPEC.toml``): the task, fixed values, the space, options.

    [task]
    kind = "matmul"                  # or "program", with program = "kernels.json", or "module:Class"
    config = "../../configs/spyre.toml"  # optional; paths are relative to the spec file
    [fixed]
    M = 64
    [space]
    split_m = {grid_search = [1, 2, 4]}
    dram.interleave_bytes = {choice = [256, 512]}   # a machine key: anything --set takes
    [sweep]
    num_samples = 1
    seed = 0

Every error names the spec file and the TOML path of the value at fault.
"""

from __future__ import annotations

import dataclasses
import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.load import read_toml
from ..errors import ConfigError
from .runner import Sweep, sweep
from .space import KINDS
from .tasks import MatmulTask, ProgramTask, Task

TABLES = {"task", "fixed", "space", "sweep"}
BUILT_IN: dict[str, type[Task]] = {"matmul": MatmulTask, "program": ProgramTask}
PATHS = {"config", "program"}  # task fields that name files, relative to the spec file
OPTIONS = {"num_samples": int, "seed": int, "executor": str, "workers": int, "address": str}


@dataclass(frozen=True)
class Spec:
    task: Task
    fixed: dict[str, Any]
    space: dict[str, Any]
    options: dict[str, Any]


def load_spec(path: str | Path) -> Spec:
    path = Path(path)
    raw = read_toml(path, "sweep spec")
    try:
        return _spec(raw, path.parent)
    except ConfigError as exc:
        raise ConfigError(exc.message, str(path), exc.path) from None


def run_spec(path: str | Path, **overrides: Any) -> Sweep:
    """Run the sweep ``path`` describes; ``overrides`` (executor, workers, ...) win over its [sweep] table."""
    spec = load_spec(path)
    options = {**spec.options, **{k: v for k, v in overrides.items() if v is not None}}
    try:
        return sweep(spec.space, spec.task, fixed=spec.fixed, **options)
    except ConfigError as exc:
        raise ConfigError(exc.message, exc.file or str(path), exc.path) from None


def _spec(raw: dict[str, Any], base: Path) -> Spec:
    unknown = sorted(set(raw) - TABLES)
    if unknown:
        raise ConfigError(f"unknown table; expected {', '.join(sorted(TABLES))}", None, unknown[0])
    for name in TABLES:
        if not isinstance(raw.get(name, {}), dict):
            raise ConfigError("expected a table", None, name)
    space = _flat(raw.get("space", {}), "space")
    if not space:
        raise ConfigError("the space is empty: give at least one parameter", None, "space")
    options = raw.get("sweep", {})
    for key, value in options.items():
        if key not in OPTIONS:
            raise ConfigError(f"unknown option; expected one of {', '.join(OPTIONS)}", None, f"sweep.{key}")
        if not isinstance(value, OPTIONS[key]) or isinstance(value, bool):
            raise ConfigError(f"expected {OPTIONS[key].__name__}, got {value!r}", None, f"sweep.{key}")
        if key == "workers" and value < 1:  # as --workers: 0 or less ran on every CPU or serially, unsaid
            raise ConfigError(f"must be at least 1, got {value}", None, "sweep.workers")
    return Spec(_task(raw.get("task", {}), base), _flat(raw.get("fixed", {}), "fixed"), space, dict(options))


def _task(raw: dict[str, Any], base: Path) -> Task:
    """The [task] table: kind "matmul" (default), "program", or "module:Class" naming any Task dataclass
    (the torch one: spyre_emu.frontend.sweep:ModelTask); its other keys are the task's string fields."""
    kind = raw.get("kind", "matmul")
    if not isinstance(kind, str):
        raise ConfigError(f"expected a string, got {kind!r}", None, "task.kind")
    cls = _task_class(kind)
    fields = {f.name for f in dataclasses.fields(cls)}
    args = {}
    for key, value in raw.items():
        if key == "kind":
            continue
        if key not in fields:
            raise ConfigError(f"unknown key for a {kind} task; expected one of {', '.join(sorted(fields))}", None,
                              f"task.{key}")
        if not isinstance(value, str):
            raise ConfigError(f"expected a string, got {value!r}", None, f"task.{key}")
        args[key] = str(base / value) if key in PATHS else value
    required = sorted(f.name for f in dataclasses.fields(cls)
                      if f.default is dataclasses.MISSING and f.name not in args)
    if required:
        raise ConfigError(f"a {kind} task needs {', '.join(f'{r} = ...' for r in required)}", None, "task")
    return cls(**args)


def _task_class(kind: str) -> type[Task]:
    if kind in BUILT_IN:
        return BUILT_IN[kind]
    module, _, name = kind.partition(":")
    try:
        cls = getattr(importlib.import_module(module), name) if name else None
    except ImportError as exc:
        raise ConfigError(f"cannot import {module!r}: {exc}", None, "task.kind") from None
    except AttributeError:
        cls = None
    if not (isinstance(cls, type) and issubclass(cls, Task) and dataclasses.is_dataclass(cls)):
        raise ConfigError(f"unknown task kind {kind!r}; expected matmul, program or module:Class naming a Task",
                          None, "task.kind")
    return cls


def _flat(table: dict[str, Any], prefix: str) -> dict[str, Any]:
    """Nested tables (``[space.dram]``, or a dotted key) as dotted keys; a one-key sampler table is a value."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict) and not (len(value) == 1 and next(iter(value)) in KINDS):
            if not value:
                raise ConfigError("empty table", None, f"{prefix}.{key}")
            out.update({f"{key}.{k}": v for k, v in _flat(value, f"{prefix}.{key}").items()})
        else:
            out[key] = value
    return out
