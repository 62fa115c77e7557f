"""A matmul's operands as a core's tiles see them: the runs of device sticks of A, B and C for a block of
batches, rows, column groups and K sticks, looked up once per kernel."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..kernel_program import TensorLayout
from .placement import Runs, grid_sticks, rows_as_one_runs, rows_as_runs


@dataclass(frozen=True)
class Operands:
    """Names and layouts of A, B, C, and the block of batches a core works on at once ((None,) for 2-D).

    A and B of a block sit in LX row by row with the block's batches innermost (``Plan.a_strides``,
    ``Plan.b_strides``), the order of torch-spyre's default 3-D layout, where the batch is the device dim
    just outside the stick: a row's sticks for consecutive batches are then one DRAM run."""

    names: tuple[str, str, str]
    layouts: tuple[TensorLayout, TensorLayout, TensorLayout]
    batches: tuple[int | None, ...]
    memo: dict = field(default_factory=dict, compare=False, repr=False)  # one kernel's A and B runs, by request

    def _runs(self, which: int, rows: np.ndarray, cols: np.ndarray) -> list[Runs]:
        """The sticks of host ``rows`` x ``cols`` as LX holds them: 2-D, per column its rows (the layout's K
        sticks or column groups outermost); 3-D, per row its columns, each for the block's batches (the layout's
        rows outermost, the batch just outside the stick). One stick lookup for them all."""
        if self.batches[0] is None:
            return rows_as_runs(grid_sticks(self.layouts[which], [rows, cols], (1, 0)))
        ids = grid_sticks(self.layouts[which], [np.array(self.batches), rows, cols], (1, 2, 0))
        return rows_as_runs(ids.reshape(rows.size, -1))

    def a(self, k_sticks: range, m0: int, rows: int) -> list[Runs]:
        """``_runs`` of A's rows ``m0 ..`` at the K sticks ``k_sticks`` (shared: never modify them)."""
        key = (0, k_sticks, m0, rows, self.batches)
        if key not in self.memo:
            self.memo[key] = self._runs(0, np.arange(m0, m0 + rows), np.array(k_sticks) * 64)
        return self.memo[key]

    def b(self, groups: range, k0: int, count: int) -> list[Runs]:
        """``_runs`` of B's K rows ``k0 .. k0 + count`` at the column groups ``groups`` (shared: never modify
        them)."""
        key = (1, groups, k0, count, self.batches)
        if key not in self.memo:
            self.memo[key] = self._runs(1, np.arange(k0, k0 + count), np.array(groups) * 64)
        return self.memo[key]

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
