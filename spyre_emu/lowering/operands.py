"""A matmul's operands as a core's tiles see them: the runs of device sticks of A, B and C for a block of
batches, rows, column groups and K sticks, looked up once per kernel."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..kernel_program import TensorLayout, dim_map
from .placement import Runs, grid_sticks, rows_as_one_runs, rows_as_runs

Lines = list[tuple[Runs, int]]  # runs of device sticks, each list to its LX offset in sticks


@dataclass(frozen=True)
class Operands:
    """Names and layouts of A, B, C, and the block of batches a core works on at once ((None,) for 2-D).

    A and B of a block sit in LX in their layouts' order (``lx_order``, ``Plan.a_strides``): in torch-spyre's
    default 3-D layout, where the batch is the device dim just outside the stick, a row's sticks for consecutive
    batches are one DRAM run and one LX run."""

    names: tuple[str, str, str]
    layouts: tuple[TensorLayout, TensorLayout, TensorLayout]
    batches: tuple[int | None, ...]
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # one kernel's A and B runs, by request

    def a(self, k_sticks: range, m0: int, rows: int, order: tuple[str, ...], strides: dict[str, int]) -> Lines:
        """``lines`` of A's rows ``m0 ..`` at the K sticks ``k_sticks`` in LX ``order`` at ``strides`` (shared:
        never modify them)."""
        key = (0, k_sticks, m0, rows, self.batches)
        if key not in self.memo:
            axes = {"batch": self.batches, "rows": np.arange(m0, m0 + rows), "k": np.array(k_sticks) * 64}
            self.memo[key] = self._lines(0, axes, order, strides)
        return self.memo[key]

    def b(self, groups: range, k0: int, count: int, order: tuple[str, ...], strides: dict[str, int]) -> Lines:
        """``lines`` of B's K rows ``k0 .. k0 + count`` at the column groups ``groups`` (shared: never modify
        them)."""
        key = (1, groups, k0, count, self.batches)
        if key not in self.memo:
            axes = {"batch": self.batches, "k": np.arange(k0, k0 + count), "groups": np.array(groups) * 64}
            self.memo[key] = self._lines(1, axes, order, strides)
        return self.memo[key]

    def _lines(self, which: int, axes: dict, order: tuple[str, ...], strides: dict[str, int]) -> Lines:
        """The sticks of an operand's host ``axes`` (by name, in host order; a 2-D one has no batch) as ``lines``
        in LX ``order``: one stick lookup for them all."""
        names = tuple(axes)[self.batches[0] is None:]
        grid = [np.array(axes[name]) for name in names]
        ids = grid_sticks(self.layouts[which], grid, tuple(names.index(d) for d in order))
        return lines(ids, tuple(strides[d] for d in order))

    def c(self, groups: range, m0: int, rows: int) -> Runs:
        """C of the block, batch after batch, column group after column group (each as a PT pass writes
        it): one stick lookup for all the groups (shared: never modify them; every core of a K group
        stores the same tile)."""
        key, cols = (2, groups, m0, rows, self.batches), np.array(groups) * 64
        if key not in self.memo:
            axes = [np.arange(m0, m0 + rows), cols]
            if self.batches[0] is not None:  # batches, columns, rows inner
                axes, order = [np.array(self.batches), *axes], (0, 2, 1)
            else:
                order = (1, 0)
            self.memo[key] = rows_as_one_runs(grid_sticks(self.layouts[2], axes, order).reshape(-1, rows))
        return self.memo[key]


def lx_order(layout: TensorLayout, dims: tuple[str, ...]) -> tuple[str, ...]:
    """An operand's host ``dims`` (by name, in host order) outermost first as its device layout orders them, the
    stick's own dim by its sticks: the order its tiles sit in LX, so that a DRAM run is an LX run. A dim the layout
    does not step (of size 1) goes innermost."""
    found = [dims[d] for d in dict.fromkeys(dim_map(layout)[:-1]) if d >= 0]
    return (*found, *(d for d in dims if d not in found))


def lines(ids: np.ndarray, strides: tuple[int, ...]) -> Lines:
    """A tile's stick ids (an axis per dim, in LX order; ``strides`` per dim, the innermost 1) as lists of runs,
    each with its LX offset in sticks: one list per stretch of LX that the inner dims fill without a gap, its runs
    broken at every line of the innermost dim (a load's pieces are whole runs of one line: ``streams.patterns``
    joins those that touch)."""
    j, span = ids.ndim - 1, ids.shape[-1]
    while j > 0 and strides[j - 1] == span:
        j -= 1
        span *= ids.shape[j]
    outer = ids.shape[:j]
    offsets = (np.indices(outer).reshape(j, -1).T @ np.array(strides[:j], np.int64)).tolist() if j else [0]
    per = math.prod(ids.shape[j:-1])  # innermost lines in each list
    return list(zip(rows_as_runs(ids.reshape(-1, ids.shape[-1]), per), offsets, strict=True))
