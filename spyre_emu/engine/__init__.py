"""simulate(): pack the unit program, run the jitted event loop, return the EventLog.

numba's on-disk cache misses edits to callees in other modules (numba issue #1833), so
the cache directory is keyed on a hash of every engine source file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numba

from ..config import Machine
from ..errors import SimulationError
from ..unit_program import UnitProgram


def _cache_dir() -> str:
    sources = sorted(Path(__file__).parent.glob("*.py"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    root = Path(os.environ.get("SPYRE_EMU_CACHE", Path.home() / ".cache" / "spyre-emu"))
    return str(root / f"numba-{digest}")


_saved, numba.config.CACHE_DIR = numba.config.CACHE_DIR, _cache_dir()
try:
    from . import layout as L
    from .log import EventLog, make_log
    from .loop import run_nb
    from .pack import pack
finally:
    numba.config.CACHE_DIR = _saved

DEFAULT_MAX_CYCLES = 1 << 62


def simulate(program: UnitProgram, machine: Machine, max_cycles: int = DEFAULT_MAX_CYCLES,
             chain_hops: bool = True) -> EventLog:
    """Run ``program`` on ``machine``; raise SimulationError on deadlock or the cycle limit.

    ``chain_hops=False`` makes every ring hop its own event: slower, same results (tested).
    """
    packed = pack(program, machine, max_cycles, chain_hops)
    status, last = run_nb(packed.state)
    if status == L.STATUS_MAX_CYCLES:
        raise SimulationError(f"not finished after --max-cycles {max_cycles}", program.source)
    if status == L.STATUS_QUEUE_FULL:
        raise SimulationError("internal event table overflow", program.source)
    if status == L.STATUS_DEADLOCK:
        raise SimulationError(_deadlock_message(packed, int(last)), program.source)
    return make_log(packed.state, packed.instructions, packed.unit_names)


def _deadlock_message(packed, last: int) -> str:
    us = packed.state[2]
    stuck = []
    for u in range(us.shape[0]):
        if us[u, L.U_PC] >= us[u, L.U_END]:
            continue
        ins = packed.instructions[us[u, L.U_PC]]
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


__all__ = ["EventLog", "simulate"]
