"""Shared leaf: what the card is (dataclasses) and how it is loaded from TOML."""

from .load import DEFAULT_CONFIG, load_machine
from .machine import DTYPE_BYTES, STICK_BYTES, Machine

__all__ = ["DEFAULT_CONFIG", "DTYPE_BYTES", "STICK_BYTES", "Machine", "load_machine"]
