"""Read a machine TOML into frozen dataclasses, apply ``--set`` overrides, validate.

Every failure is a ConfigError naming the file (or the --set option) and the key.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ConfigError
from ..files import read_bytes
from .machine import Machine

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "spyre.toml"
INT64_MAX = (1 << 63) - 1
T = TypeVar("T")  # the engine keeps every value in int64 arrays


def load_machine(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Machine:
    """Load ``path`` (default ``configs/spyre.toml``) with ``KEY=VALUE`` overrides applied."""
    machine, blame = load_config(Machine, Path(path) if path else DEFAULT_CONFIG, overrides)
    # Every core and memory controller needs a ring stop: checked first, as problems() lists them all.
    for key, count in (("cores.count", machine.cores.count), ("dram.controllers", machine.dram.controllers)):
        if count > len(machine.ring.stops):
            raise ConfigError(f"{count} is more than the {len(machine.ring.stops)} ring stops in ring.stops",
                              blame(key), key)
    for key, message in machine.problems():
        raise ConfigError(message, blame(key), key)
    return machine


def load_config(cls: type[T], path: Path, overrides: list[str] | tuple[str, ...]) -> tuple[T, Callable[[str], str]]:
    """The dataclass ``cls`` built from TOML ``path`` with ``KEY=VALUE`` overrides, and ``blame``: the
    --set option that last wrote a key (or a table holding it), else the file, for its error messages."""
    raw = read_toml(path, "config")
    setters = {_apply_override(raw, item): f"--set {item}" for item in overrides}

    def blame(key: str) -> str:
        hits = [k for k in setters if key == k or key.startswith(k + ".")]
        return setters[max(hits, key=len)] if hits else str(path)

    try:
        return _build(cls, raw, str(path), ""), blame
    except ConfigError as exc:
        raise ConfigError(exc.message, blame(exc.path or ""), exc.path) from None


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """A TOML file (a config, a sweep spec) as a dict; any read or parse failure is one ConfigError naming it."""
    try:
        return parse_toml(read_bytes(path).decode("utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read {what}: {exc.strerror}", str(path)) from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"invalid TOML: not UTF-8 text ({exc.reason} at byte {exc.start})", str(path)) from None
    except ValueError as exc:  # TOMLDecodeError, nesting too deep, an integer of more than 4300 digits
        raise ConfigError(f"invalid TOML: {exc}", str(path)) from None


def parse_toml(text: str) -> dict[str, Any]:
    """tomllib.loads, its every failure a ValueError: it raises RecursionError on arrays or inline tables nested
    past Python's stack, and int()'s ValueError on an integer of more than 4300 digits."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _apply_override(raw: dict[str, Any], item: str) -> str:
    """Set one ``KEY=VALUE`` in ``raw``; returns the key."""
    key, sep, text = item.partition("=")
    where = f"--set {item}"
    if not sep or not key.strip():
        raise ConfigError("expected KEY=VALUE, e.g. ring.hop_latency_cycles=3", where)
    try:
        value = parse_toml(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    except ValueError as exc:  # valid TOML syntax that tomllib cannot hold
        raise ConfigError(f"invalid value: {exc}", where) from None
    *parents, leaf = key.strip().split(".")
    node = raw
    for part in parents:
        if not isinstance(node.get(part), dict):
            raise ConfigError(f"unknown key {key.strip()!r}", where)
        node = node[part]
    if leaf not in node:
        raise ConfigError(f"unknown key {key.strip()!r}", where)
    node[leaf] = value
    return key.strip()


def _build(cls: type, raw: Any, file: str, prefix: str) -> Any:
    """Build dataclass ``cls`` from table ``raw``, checking keys and types exactly."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a table, got {type(raw).__name__}", file, prefix.rstrip(".") or None)
    hints = typing.get_type_hints(cls)
    fields = [f.name for f in dataclasses.fields(cls)]
    for key in raw:
        if key not in fields:
            raise ConfigError(f"unknown key (expected one of {', '.join(fields)})", file, prefix + key)
    values = {}
    for name in fields:
        key = prefix + name
        if name not in raw:
            raise ConfigError("missing key", file, key)
        values[name] = _convert(hints[name], raw[name], file, key)
    return cls(**values)


def _convert(hint: Any, value: Any, file: str, key: str) -> Any:
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, file, key + ".")
    origin = typing.get_origin(hint)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError("expected a table", file, key)
        return {k: _convert(int, v, file, f"{key}.{k}") for k, v in value.items()}
    if origin is tuple:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError("expected an array of strings", file, key)
        return tuple(value)
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise ConfigError(f"expected a finite number, got {value!r}", file, key)
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        if abs(value) > INT64_MAX:
            raise ConfigError(f"{value} does not fit in 64 bits", file, key)
        return value
    if hint is str and isinstance(value, str):
        return value
    raise ConfigError(f"expected {hint.__name__}, got {type(value).__name__} {value!r}", file, key)
