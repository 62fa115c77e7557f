"""spyre-emu: a cycle-accurate simulator of the IBM Spyre AI accelerator.

The simulator never imports torch; the torch.compile front end is ``spyre_emu.frontend``.
"""

from .config import Machine, load_machine
from .errors import ConfigError, ProgramError, SimulationError, SpyreEmuError
from .pipeline import Program, RunResult, load, load_program, run
from .results import Report

__all__ = ["ConfigError", "Machine", "Program", "ProgramError", "Report", "RunResult", "SimulationError",
           "SpyreEmuError", "load", "load_machine", "load_program", "run"]
