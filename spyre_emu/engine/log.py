"""EventLog: what crosses from the engine to results — per-instruction times and counters."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..unit_program import Instruction
from . import layout as L

UNIT_STATS = ("busy_cycles", "stall_token_cycles", "stall_data_cycles", "stall_room_cycles", "stall_link_cycles",
              "stall_dram_cycles", "sticks")
CHANNEL_STATS = ("read_sticks", "write_sticks", "busy_cycles", "row_hits", "row_misses",
                 "row_conflicts", "refreshes", "turnarounds")
LINK_STATS = ("sticks", "wait_cycles")


@dataclass(frozen=True)
class EventLog:
    """Times are cycles; ``order`` is the completion order (ties broken as the engine did)."""

    instructions: Sequence[Instruction]  # the program's own (a tuple), not a copy
    start: np.ndarray
    end: np.ndarray
    first_push: np.ndarray
    order: np.ndarray
    unit_names: list[str]
    unit_stats: np.ndarray      # [units, UNIT_STATS]
    channel_stats: np.ndarray   # [channels, CHANNEL_STATS]
    link_stats: np.ndarray      # [2 * stops, LINK_STATS]: link 2s+0 leaves stop s clockwise
    total_cycles: int
    # Per instruction, the cycles its unit waited for data in the FIFO it reads, and for room in the
    # FIFO it writes (both inside start..end). None in logs made by hand: no FIFO stalls.
    stall_data: np.ndarray | None = None
    stall_room: np.ndarray | None = None


def make_log(state: tuple, instructions: Sequence[Instruction], unit_names: list[str]) -> EventLog:
    """The log of a finished run. The per-instruction arrays are views of the state's rows, not copies:
    ``simulate`` drops the state once the log is made."""
    us, ch, link = state[2], state[5], state[8]
    n = len(instructions)
    times, order = state[14], state[15]
    end = times[L.T_END, :n]
    return EventLog(
        instructions=instructions,
        start=times[L.T_START, :n], end=end, first_push=times[L.T_FIRST_PUSH, :n],
        order=order[:n],
        unit_names=unit_names,
        unit_stats=us[:, L.STAT_FIRST:].copy(),
        channel_stats=ch[:, L.D_STAT_FIRST:].copy(),
        link_stats=link[:, L.L_STICKS:].copy(),
        total_cycles=int(end.max()) if n else 0,
        stall_data=times[L.T_STALL_DATA, :n], stall_room=times[L.T_STALL_ROOM, :n],
    )
