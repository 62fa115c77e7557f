"""The distinct instructions of a log: reports work out each figure once per distinct instruction.

A program repeats its instructions: equal instructions share one args dict (unit_program.load), and a
split-K program has 162,496 instructions with 11,584 distinct (core, unit, op, args). A Python loop
per instruction in each figure of the report cost more than a second there; numbering them once, in C,
lets each figure loop over the distinct ones and gather with numpy.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from itertools import count
from operator import attrgetter

import numpy as np

from ..unit_program import Instruction


@dataclass(frozen=True)
class Distinct:
    """``which[i]``: instruction i's index in ``first``, which holds one instruction of each distinct
    (core, unit, op, args), in order of first use."""

    which: np.ndarray
    first: list[Instruction]


def distinct(instructions: tuple[Instruction, ...] | list[Instruction]) -> Distinct:
    """Args are told apart by identity: the instructions keep every dict alive, so no id is reused
    meanwhile, and instructions with equal args in separate dicts are only counted apart."""
    fields = (map(attrgetter(name), instructions) for name in ("core", "unit", "op"))
    keys = list(zip(*fields, map(id, map(attrgetter("args"), instructions)), strict=True))
    number: defaultdict[tuple, int] = defaultdict(count().__next__)
    which = np.fromiter(map(number.__getitem__, keys), np.int64, len(keys))
    one = dict(zip(keys, instructions, strict=True))
    return Distinct(which, [one[k] for k in number])
