"""Results by content hash, in memory and on disk: what was simulated once is not simulated again.

The engine is a deterministic function of what it is given (integer cycles, a canonical event
order, no wall clock, no dict order), so a result stored under a hash of everything it was computed
from is the result a fresh run would give. Every key also covers the simulator's own source
(every ``spyre_emu`` module), so an edit to the code is a miss, never a stale hit.

Entries live in ``$SPYRE_EMU_CACHE/results`` (default ``~/.cache/spyre-emu/results``), next to the
numba cache, one pickle per key, written to a temporary file and renamed into place (``os.replace``),
so a reader never sees half an entry. An entry that cannot be read is a miss. ``SPYRE_EMU_RESULT_CACHE=0``
turns the cache off (memory and disk).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import os
import pickle
import tempfile
from collections import OrderedDict
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

MEMORY_ENTRIES = 8  # results kept in memory, most recently used; each may hold a large event log
_MEMORY: OrderedDict[str, Any] = OrderedDict()


def enabled() -> bool:
    return os.environ.get("SPYRE_EMU_RESULT_CACHE", "1") != "0"


def directory() -> Path:
    return Path(os.environ.get("SPYRE_EMU_CACHE", Path.home() / ".cache" / "spyre-emu")) / "results"


@cache
def code_version() -> bytes:
    """A hash of every source file of the simulator."""
    sources = sorted(Path(__file__).parent.rglob("*.py"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources)).digest()


def key(*parts: bytes) -> str:
    """The key of a result computed from ``parts`` by this version of the simulator."""
    h = hashlib.sha256(code_version())
    for part in parts:
        h.update(len(part).to_bytes(8, "little"))  # so that parts cannot run into each other
        h.update(part)
    return h.hexdigest()


def digest(value: Any) -> bytes:
    """A hash of ``value``'s pickle, streamed into the hash (a large program is never held as bytes)."""
    h = hashlib.sha256()

    class _Sink:
        write = h.update

    pickle.Pickler(_Sink(), protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    return h.digest()


def lookup(k: str) -> Any | None:
    """The value stored under ``k``, or None (never stored, unreadable, or the cache is off)."""
    if not enabled():
        return None
    if k in _MEMORY:
        _MEMORY.move_to_end(k)
        return _MEMORY[k]
    try:
        with _path(k).open("rb") as f, collector_paused():
            value = pickle.load(f)
    except Exception:  # any unreadable entry (missing, truncated, foreign, of an older pickle) is a miss
        return None
    _remember(k, value)
    return value


def store(k: str, value: Any) -> None:
    """Keep ``value`` under ``k`` in memory and on disk; a disk that refuses it only costs the disk copy."""
    if not enabled():
        return
    _remember(k, value)
    path = _path(k)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as f:
                pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError:
        pass


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a burst of allocation that makes few cycles (a large
    entry unpickled, a model's graph traced and compiled): each object allocated counts towards the
    next collection, and a full one walks every live object of the process (about 0.2 s each with torch
    and Dynamo's state loaded: two of them fell inside the front end's part of a 40-layer decode).
    Reference counting still frees what is dropped; cycles left wait for the next collection after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def clear_memory() -> None:
    _MEMORY.clear()


def _remember(k: str, value: Any) -> None:
    _MEMORY[k] = value
    _MEMORY.move_to_end(k)
    while len(_MEMORY) > MEMORY_ENTRIES:
        _MEMORY.popitem(last=False)


def _path(k: str) -> Path:
    return directory() / k[:2] / f"{k}.pkl"
