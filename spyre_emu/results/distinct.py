"""The distinct instructions of a log: reports work out each figure once per distinct instruction.

A program repeats its instructions: equal instructions share one args dict (unit_program.load), and a
split-K program has 162,496 instructions with 11,584 distinct (core, unit, op, args). A Python loop
per instruction in each figure of the report cost more than a second there; numbering them once lets
each figure loop over the distinct ones and gather with numpy.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    index: dict[tuple, int] = {}
    which, first = [], []
    for ins in instructions:
        key = (ins.core, ins.unit, ins.op, id(ins.args))
        row = index.get(key)
        if row is None:
            row = index[key] = len(first)
            first.append(ins)
        which.append(row)
    return Distinct(np.array(which, np.int64), first)
