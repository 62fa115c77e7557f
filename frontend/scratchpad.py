"""Pass 5: intermediates in LX when they fit."""

from __future__ import annotations

from spyre_emu.config import Machine

from .graph import Graph


def plan_scratchpad(graph: Graph, machine: Machine) -> None:
    """Filled in below."""
