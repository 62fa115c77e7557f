"""The backend's options, from ``torch.compile(..., options={...})``, checked with one-line errors."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from spyre_emu.errors import ConfigError

FALLBACKS = ("cpu", "error")
WEIGHTS = ("prepared", "stored")


@dataclass(frozen=True)
class Options:
    """``machine``: a config TOML (default configs/spyre.toml); ``set``: KEY=VALUE overrides;
    ``cores``: cores the work division uses (default: all of the card's); ``functional``: the
    simulator computes the results (else torch does, and only timing is simulated); ``trace``: a
    Chrome trace file per kernel program; ``fallback``: "cpu" runs unsupported ops on the host,
    "error" refuses them; ``print_report``: print the report after every call; ``cache``: reuse the
    results of kernel programs simulated before (spyre_emu.memo), off: simulate every one; ``cards``:
    tensor parallel over this many cards of a drawer (tensor_parallel.py), the report's ``drawer``
    timed by the host model (with ``trace``, the step's timeline in ``<trace>``, each kernel program's own
    in ``<trace>.<i>.json``); ``host``: the
    host model's TOML (default configs/host.toml), whose ``[cpu]`` also prices CPU fallbacks;
    ``on_card``: names of the call's arguments the caller keeps on the card (a serving loop's KV
    cache), which the step does not copy in (frontend/transfers.py); ``weights``: "prepared" uploads each
    parameter in its consumer's layout (host input preparation), "stored" keeps it on the card in its own
    layout and relayouts it there before each consumer that reads it otherwise, every call (layout.py)."""

    machine: str | None = None
    set: tuple[str, ...] = ()
    cores: int | None = None
    functional: bool = True
    trace: str | None = None
    fallback: str = "cpu"
    print_report: bool = False
    cache: bool = True
    cards: int | None = None
    host: str | None = None
    on_card: tuple[str, ...] = ()
    weights: str = "prepared"


def parse_options(raw: dict[str, Any] | None) -> Options:
    raw = dict(raw or {})
    known = {f.name: f for f in fields(Options)}
    for key in raw:
        if key not in known:
            raise ConfigError(f"unknown option (known: {', '.join(known)})", None, f"options.{key}")
    _check(raw, "set", isinstance(raw.get("set"), str | list | tuple), "must be KEY=VALUE strings")
    if "set" in raw:
        raw["set"] = tuple([raw["set"]] if isinstance(raw["set"], str) else raw["set"])
    _check(raw, "functional", isinstance(raw.get("functional"), bool), "must be true or false")
    for key in ("print_report", "cache"):
        _check(raw, key, isinstance(raw.get(key), bool), "must be true or false")
    _check(raw, "fallback", raw.get("fallback") in FALLBACKS, f"must be one of {', '.join(FALLBACKS)}")
    _check(raw, "weights", raw.get("weights") in WEIGHTS, f"must be one of {', '.join(WEIGHTS)}")
    cores = raw.get("cores")
    _check(raw, "cores", isinstance(cores, int) and not isinstance(cores, bool) and cores > 0,
           "must be a positive number of cores")
    cards = raw.get("cards")
    _check(raw, "cards", isinstance(cards, int) and not isinstance(cards, bool) and 1 <= cards <= 8,
           "must be a number of cards from 1 to 8 (a drawer)")
    on_card = raw.get("on_card")
    _check(raw, "on_card", isinstance(on_card, list | tuple) and all(isinstance(a, str) for a in on_card),
           "must be a list of argument names")
    if "on_card" in raw:
        raw["on_card"] = tuple(on_card)
    for key in ("machine", "trace", "host"):
        _check(raw, key, isinstance(raw.get(key), str), "must be a file path")
    _check(raw, "set", all(isinstance(s, str) and "=" in s for s in raw.get("set", ())),
           "must be KEY=VALUE strings")
    return Options(**raw)


def _check(raw: dict[str, Any], key: str, ok: bool, message: str) -> None:
    if key in raw and not ok:
        raise ConfigError(f"{message}, got {raw[key]!r}", None, f"options.{key}")
