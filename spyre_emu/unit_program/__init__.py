"""What the engine runs: per core, one instruction stream per hardware unit."""

from .load import load_unit_program, parse_unit_program
from .model import HOST_CORE, Buffer, Instruction, UnitProgram

__all__ = ["HOST_CORE", "Buffer", "Instruction", "UnitProgram", "load_unit_program",
           "parse_unit_program"]
