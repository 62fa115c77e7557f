"""spyre-emu: a cycle-accurate simulator of the IBM Spyre AI accelerator.

The simulator never imports torch; the torch.compile front end is ``spyre_emu.frontend``. The
public names load on first use (PEP 562), so that importing the package, as the console script
does before anything else, is cheap and an interrupt while the engine loads can still be answered
in one line (``entry.py``).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_HOME = {"Machine": "config", "load_machine": "config", "ConfigError": "errors", "ProgramError": "errors",
         "SimulationError": "errors", "SpyreEmuError": "errors", "Program": "pipeline", "RunResult": "pipeline",
         "load": "pipeline", "load_program": "pipeline", "run": "pipeline", "Report": "results"}

__all__ = ["ConfigError", "Machine", "Program", "ProgramError", "Report", "RunResult", "SimulationError",
           "SpyreEmuError", "load", "load_machine", "load_program", "run"]


def __getattr__(name: str) -> Any:
    if name not in _HOME:
        raise AttributeError(f"module 'spyre_emu' has no attribute {name!r}")
    return getattr(import_module(f".{_HOME[name]}", __name__), name)
