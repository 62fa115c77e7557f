"""simulate(): pack the unit program, run the jitted event loop, return the EventLog.

numba's on-disk cache misses edits to callees in other modules (numba issue #1833), so
the cache directory is keyed on a hash of every engine source file (``cache.py``; every jitted
function is made by ``jit.njit``, which binds it to that directory). numba and the jitted modules
load with the first simulation, not with this package: a command that simulates nothing (or finds
its result in the result cache) does not pay for them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..config import Machine
from ..errors import SimulationError
from ..unit_program import UnitProgram
from . import layout as L
from .cache import CACHE_DIR, note
from .log import EventLog, make_log
from .pack import pack


def _recovering(dispatcher: Any) -> Callable[..., Any]:
    """``dispatcher``, but a first call that fails (a corrupted or truncated cache file: numba unpickles it)
    empties the cache folder and compiles afresh; a second failure is a real one and propagates. After a
    call has succeeded, calls go straight through (``dispatcher.signatures`` costs about 13 us a call)."""
    ready = False

    def call(*args: Any) -> Any:
        nonlocal ready
        if ready:
            return dispatcher(*args)
        try:
            result = dispatcher(*args)
        except Exception as exc:  # noqa: BLE001 -- unpickling garbage raises almost anything
            note(f"the numba cache {CACHE_DIR} is unreadable ({type(exc).__name__}); compiling afresh")
            for path in Path(CACHE_DIR).rglob("*"):
                if path.is_file():
                    path.unlink(missing_ok=True)
            result = dispatcher(*args)
        ready = True
        return result
    return call


_LOOP: tuple[Callable[..., Any], Callable[..., Any]] | None = None  # start_nb, run_nb once loaded


def _loop() -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The jitted entry points, imported (numba with them) on the first simulation. One assignment of the pair:
    threads simulating for the first time at once each get a whole pair (extending a shared list gave a thread
    four entries to unpack)."""
    global _LOOP  # noqa: PLW0603 -- set once, by the first simulation
    if _LOOP is None:
        from .loop import run_nb, start_nb  # noqa: PLC0415 -- numba loads here, not with the package
        _LOOP = (_recovering(start_nb), _recovering(run_nb))
    return _LOOP


DEFAULT_MAX_CYCLES = 1 << 62
EVENTS_PER_CALL = 1 << 20  # about 0.1 s of the loop between two progress reports

# progress(cycle, instructions done, instructions in all, events handled so far)
Progress = Callable[[int, int, int, int], None]


def simulate(program: UnitProgram, machine: Machine, max_cycles: int = DEFAULT_MAX_CYCLES,
             chain_hops: bool = True, progress: Progress | None = None,
             events_per_call: int = EVENTS_PER_CALL, serve_ahead: bool = True) -> EventLog:
    """Run ``program`` on ``machine``; raise SimulationError on deadlock or the cycle limit.

    ``chain_hops=False`` makes every ring hop its own event, ``serve_ahead=False`` every pick of a DRAM
    channel: slower, same results (tested).
    The jitted loop returns every ``events_per_call`` events so that ``progress`` can be called;
    it resumes where it stopped, so the results do not depend on it (tested).
    """
    packed = pack(program, machine, max_cycles, chain_hops, serve_ahead)
    status, last = _run(packed, progress, events_per_call)
    if status == L.STATUS_MAX_CYCLES:
        raise SimulationError(f"not finished after --max-cycles {max_cycles}", program.source)
    if status == L.STATUS_QUEUE_FULL:
        raise SimulationError("internal event table overflow", program.source)
    if status == L.STATUS_DEADLOCK:
        raise SimulationError(_deadlock_message(packed, int(last)), program.source)
    return make_log(packed.state, packed.instructions, packed.unit_names)


def _run(packed, progress: Progress | None, events_per_call: int) -> tuple[int, int]:
    """The jitted loop, called again while it reports its event budget spent."""
    start_nb, run_nb = _loop()
    st = packed.state
    if not start_nb(st):
        return L.STATUS_QUEUE_FULL, 0
    status, last, events = L.STATUS_RUNNING, 0, 0
    while status == L.STATUS_RUNNING:
        status, last = run_nb(st, last, events_per_call)
        events += events_per_call
        if progress is not None and status == L.STATUS_RUNNING:
            progress(int(last), int(st[L.ST_ORDER][-1]), len(packed.instructions), events)
    return status, last


def _deadlock_message(packed, last: int) -> str:
    us = packed.state[2]
    stuck = []
    for u in range(us.shape[0]):
        if us[u, L.U_OLDEST] >= us[u, L.U_END]:
            continue
        ins = packed.instructions[us[u, L.U_PC] if us[u, L.U_PC] < us[u, L.U_END] else us[u, L.U_OLDEST]]
        if us[u, L.U_WAITTOK] >= 0:
            why = f"waits for token {packed.tokens[us[u, L.U_WAITTOK]]!r}"
        elif us[u, L.U_BLOCK] == L.BLOCK_DATA:
            why = "waits for data in its FIFO"
        elif us[u, L.U_BLOCK] == L.BLOCK_ROOM:
            why = "waits for room in its FIFO"
        else:
            why = "cannot proceed"
        stuck.append(f"{ins.path} ({packed.unit_names[u]} {ins.op}) {why}")
    shown = "; ".join(stuck[:4]) + (f"; and {len(stuck) - 4} more" if len(stuck) > 4 else "")
    return f"deadlock at cycle {last}: {shown}"


__all__ = ["EventLog", "Progress", "simulate"]
