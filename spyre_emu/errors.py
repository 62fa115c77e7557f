"""The one exception family: every user-facing error names where it came from.

The CLI prints ``str(error)`` as a single line and exits with status 2, so each
message must carry the file and the JSON/TOML path (or option) it is about.
"""

from __future__ import annotations


class SpyreEmuError(Exception):
    """A problem with the user's input, reported as one line: ``file: path: message``."""

    def __init__(self, message: str, file: str | None = None, path: str | None = None):
        self.message = message
        self.file = file
        self.path = path
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = [part for part in (self.file, self.path) if part]
        return ": ".join([*where, self.message])


class ConfigError(SpyreEmuError):
    """The machine configuration (TOML or a --set override) is invalid."""


class ProgramError(SpyreEmuError):
    """A program file is malformed or asks for something the card cannot do."""


class LxOverflowError(ProgramError):
    """A core's LX cannot hold what the program keeps there: its LX tensors, or a kernel's buffers beside them."""


class SimulationError(SpyreEmuError):
    """The simulation cannot finish: a deadlock or the --max-cycles limit."""
