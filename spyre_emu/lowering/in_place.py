"""Matmul operands kept in LX in their tensors' own places: A read, or C written, where an LX tensor lives.

An LX tensor (``lx.py``) is held by each core as the sticks its slice owns, in device order, from one base.
A matmul whose A or C is such a tensor reads A there (no A load) or accumulates C there (no store), when
each core's piece is exactly the sticks it holds (the scratchpad rule: every kernel touching the tensor
gives each core the same slice) and the places fit what a PT pass takes: A's sticks at one stride between
a row's K sticks and one between rows (``a_k_stride``, ``a_row_stride``), C's rows at one stride
(``c_row_stride``), the same over the core's whole piece; a pass's own first stick may then be anywhere.
Otherwise the kernel is refused, naming the tensor. B in LX and split K are refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import TensorLayout
from .cohorts import Piece
from .lx import Resident
from .placement import grid_sticks


@dataclass(frozen=True)
class InPlace:
    """One core's LX operands: the LX byte address of every A stick of its piece ([batch, row, K stick]) and
    every C stick ([batch, column group, row]), None for an operand in DRAM, and their strides in sticks."""

    a: np.ndarray | None = None
    c: np.ndarray | None = None
    a_strides: tuple[int, int] = (1, 1)  # a_k_stride, a_row_stride
    c_stride: int = 1

    def tile(self, piece: Piece, tile: Piece, first: int, ks: int) -> tuple[np.ndarray | None, np.ndarray | None]:
        """A's first stick of each pass row at K stick ``ks`` ([batch, row]) and C's ([batch, group, row]) for
        ``tile``, whose batches start at the piece's ``first``-th."""
        nb, r0, g0 = len(tile.batches), tile.m[0] - piece.m[0], tile.g[0] - piece.g[0]
        rows, groups = slice(r0, r0 + tile.m[1]), slice(g0, g0 + tile.g[1])
        a = None if self.a is None else self.a[first:first + nb, rows, ks - piece.k[0]]
        c = None if self.c is None else self.c[first:first + nb, groups, rows]
        return a, c


DRAM = InPlace()  # both operands in DRAM


def in_place(piece: Piece, names: tuple[str, str, str], layouts: tuple[TensorLayout, ...],
             residents: dict[str, Resident], source: str, path: str) -> InPlace:
    """Where ``piece``'s A and C sticks are in its core's LX, for the operands that are LX tensors."""
    a_res, c_res = residents.get(names[0]), residents.get(names[2])
    if a_res is None and c_res is None:
        return DRAM
    batched = piece.batches[0] is not None
    rows = np.arange(piece.m[0], sum(piece.m))
    lead = [np.array(piece.batches)] if batched else []

    def addresses(which: int, res: Resident, cols: np.ndarray, order: tuple[int, ...]) -> np.ndarray:
        grid = grid_sticks(layouts[which], [*lead, rows, cols], order if batched else tuple(o - 1 for o in order[1:]))
        return res.addr(piece.core, grid.reshape(-1), source, path).reshape((1,) * (not batched) + grid.shape)

    def stride(at: np.ndarray, axis: int, name: str, what: str) -> int:
        steps = np.unique(np.diff(at, axis=axis))
        if steps.size > 1 or (steps.size and (steps[0] <= 0 or steps[0] % STICK_BYTES)):
            raise ProgramError(f"matmul {what} {name!r} in LX: core {piece.core}'s sticks are not at one stride a PT "
                               "pass can read (keep it in DRAM)", source, path)
        return int(steps[0]) // STICK_BYTES if steps.size else 1

    a = c = None
    a_strides, c_stride = (1, 1), 1
    if a_res is not None:
        k_sticks = np.arange(piece.k[0], sum(piece.k)) * 64
        a = addresses(0, a_res, k_sticks, (0, 1, 2))  # [batch, row, K stick]
        a_strides = stride(a, 2, names[0], "A"), stride(a, 1, names[0], "A")
    if c_res is not None:
        cols = np.arange(piece.g[0], sum(piece.g)) * 64
        c = addresses(2, c_res, cols, (0, 2, 1))  # [batch, column group, row]
        c_stride = stride(c, 2, names[2], "C")
    return InPlace(a, c, a_strides, c_stride)
