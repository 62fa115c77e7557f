"""A space of parameters and the points it expands to, in Ray Tune's vocabulary.

A space maps each parameter to a fixed value or a domain: ``grid_search`` (every value, the grids
of all parameters crossed), ``choice`` (one of the values, drawn), ``uniform`` and ``loguniform``
(a float in [low, high)), ``randint`` (an int in [low, high)). As in Tune, the grid is crossed
once per sample (``num_samples``) and the drawn parameters are drawn anew for every point. Points
come in a fixed order (the first grid parameter varies slowest) and every draw comes from one
generator seeded with ``seed``, so a space and a seed always give the same points. ``to_tune``
hands the same space to ``ray.tune``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError

Value = int | float | str | bool | list
Point = dict[str, Value]


@dataclass(frozen=True)
class Domain:
    """One parameter's domain: ``kind`` is a Tune sampler name, ``args`` its values or bounds."""

    kind: str
    args: tuple

    def draw(self, rng: np.random.Generator) -> Value:
        if self.kind == "choice":
            return _plain(self.args[int(rng.integers(len(self.args)))])
        low, high = self.args
        if self.kind == "randint":
            return int(rng.integers(low, high))
        if self.kind == "loguniform":
            return float(math.exp(rng.uniform(math.log(low), math.log(high))))
        return float(rng.uniform(low, high))


def grid_search(values: list) -> Domain:
    return _domain("grid_search", values, None)


def choice(values: list) -> Domain:
    return _domain("choice", values, None)


def uniform(low: float, high: float) -> Domain:
    return _domain("uniform", [low, high], None)


def loguniform(low: float, high: float) -> Domain:
    return _domain("loguniform", [low, high], None)


def randint(low: int, high: int) -> Domain:
    return _domain("randint", [low, high], None)


INT64_MAX = (1 << 63) - 1  # numpy draws randint's values as int64
MAX_POINTS = 1_000_000  # every point is built before any runs; far past what a sweep simulates in a day
KINDS = ("grid_search", "choice", "uniform", "loguniform", "randint")


def domain_of(spec: Any, where: str | None) -> Value | Domain:
    """A spec's value for one parameter: a one-key table naming a sampler is a domain, anything else is
    a fixed value (TOML gives ``{grid_search = [1, 2]}`` as a dict)."""
    if isinstance(spec, Domain):
        return spec
    if isinstance(spec, dict):
        if len(spec) != 1 or next(iter(spec)) not in KINDS:
            raise ConfigError(f"expected a value or one of {{{', '.join(k + ' = ...' for k in KINDS)}}}", None,
                              where)
        kind, args = next(iter(spec.items()))
        return _domain(kind, args, where)
    return spec


def _domain(kind: str, args: Any, where: str | None) -> Domain:
    if not isinstance(args, list | tuple):
        raise ConfigError(f"{kind} takes a list, got {type(args).__name__}", None, where)
    if kind in ("grid_search", "choice"):
        if not args:
            raise ConfigError(f"{kind} has no values", None, where)
        return Domain(kind, tuple(args))
    if len(args) != 2 or not all(isinstance(a, int | float) and not isinstance(a, bool) and math.isfinite(a)
                                 for a in args):
        raise ConfigError(f"{kind} takes [low, high], two finite numbers", None, where)
    low, high = args
    if kind == "randint" and not all(isinstance(a, int) and abs(a) <= INT64_MAX for a in args):
        raise ConfigError("randint takes [low, high], two integers of 64 bits", None, where)
    if kind == "uniform" and not math.isfinite(high - low):  # numpy draws from low + (high - low) * u
        raise ConfigError(f"uniform needs high - low to be finite, got [{low}, {high}]", None, where)
    if not low < high or (kind == "loguniform" and low <= 0):
        raise ConfigError(f"{kind} needs {'0 < ' if kind == 'loguniform' else ''}low < high, got [{low}, {high}]",
                          None, where)
    return Domain(kind, (low, high))


def expand(space: dict[str, Any], num_samples: int = 1, seed: int = 0) -> list[Point]:
    """Every point of ``space``: the grid crossed ``num_samples`` times, drawn parameters drawn per point."""
    if num_samples < 1:
        raise ConfigError(f"num_samples must be at least 1, got {num_samples}", None, "sweep.num_samples")
    if seed < 0:  # numpy's generators take any whole number from 0 up
        raise ConfigError(f"seed must be at least 0, got {seed}", None, "sweep.seed")
    space = {k: domain_of(v, f"space.{k}") for k, v in space.items()}
    grid = [k for k, v in space.items() if isinstance(v, Domain) and v.kind == "grid_search"]
    count = num_samples * math.prod(len(space[k].args) for k in grid)
    if count > MAX_POINTS:
        raise ConfigError(f"the space has {count:,} points (its grids crossed, times num_samples); a sweep takes at "
                          f"most {MAX_POINTS:,}", None, "space")
    rng = np.random.default_rng(seed)
    points = []
    for _ in range(num_samples):
        for values in itertools.product(*(space[k].args for k in grid)):
            chosen = dict(zip(grid, values, strict=True))
            points.append({k: _plain(chosen[k]) if k in chosen else v.draw(rng) if isinstance(v, Domain)
                           else _plain(v) for k, v in space.items()})
    return points


def to_tune(space: dict[str, Any]) -> dict[str, Any]:
    """The same space as ``ray.tune`` domains (needs the ``ray`` extra)."""
    from ray import tune  # noqa: PLC0415 -- optional

    def convert(v: Value | Domain) -> Any:
        if not isinstance(v, Domain):
            return v
        if v.kind in ("grid_search", "choice"):
            return getattr(tune, v.kind)(list(v.args))
        return getattr(tune, v.kind)(*v.args)
    return {k: convert(domain_of(v, k)) for k, v in space.items()}


def tune_trainable(task: Callable[[Point], dict[str, Any]], fixed: Point | None = None) -> Callable[[Point], dict]:
    """A Ray Tune function trainable for ``tune.Tuner``: it simulates the trial's config (with the
    ``fixed`` values) and reports the point's figures as the trial's result."""
    fixed = dict(fixed or {})

    def trainable(config: Point) -> dict[str, Any]:
        return task({**fixed, **{k: _plain(v) for k, v in config.items()}})
    return trainable


def _plain(value: Any) -> Value:
    """A point's value as JSON and TOML have it (a tuple from Python becomes a list)."""
    return [_plain(v) for v in value] if isinstance(value, list | tuple) else value
