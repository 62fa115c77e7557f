"""Read a machine TOML into frozen dataclasses, apply ``--set`` overrides, validate.

Every failure is a ConfigError naming the file (or the --set option) and the key.
"""

from __future__ import annotations

import dataclasses
import tomllib
import typing
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from .machine import Machine

DEFAULT_CONFIG = Path(__file__).resolve().parents[2] / "configs" / "spyre.toml"


def load_machine(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Machine:
    """Load ``path`` (default ``configs/spyre.toml``) with ``KEY=VALUE`` overrides applied."""
    path = Path(path) if path else DEFAULT_CONFIG
    try:
        raw = tomllib.loads(path.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"invalid TOML: {exc}", str(path)) from None
    for item in overrides:
        _apply_override(raw, item)
    machine = _build(Machine, raw, str(path), "")
    for key, message in machine.problems():
        raise ConfigError(f"{key}: {message}", str(path))
    return machine


def _apply_override(raw: dict[str, Any], item: str) -> None:
    key, sep, text = item.partition("=")
    where = f"--set {item}"
    if not sep or not key.strip():
        raise ConfigError("expected KEY=VALUE, e.g. ring.hop_latency_cycles=3", where)
    try:
        value = tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        value = text
    *parents, leaf = key.strip().split(".")
    node = raw
    for part in parents:
        if not isinstance(node.get(part), dict):
            raise ConfigError(f"unknown key {key.strip()!r}", where)
        node = node[part]
    if leaf not in node:
        raise ConfigError(f"unknown key {key.strip()!r}", where)
    node[leaf] = value


def _build(cls: type, raw: Any, file: str, prefix: str) -> Any:
    """Build dataclass ``cls`` from table ``raw``, checking keys and types exactly."""
    if not isinstance(raw, dict):
        raise ConfigError(f"expected a table, got {type(raw).__name__}", file, prefix or None)
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
        return float(value)
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is str and isinstance(value, str):
        return value
    raise ConfigError(f"expected {hint.__name__}, got {type(value).__name__} {value!r}", file, key)
