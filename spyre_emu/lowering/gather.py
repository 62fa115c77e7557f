"""embedding: y[r, :] = table[index[r], :], rows of a DRAM table picked by int32 indices the card holds.

spyre-emu's op (torch-spyre runs embedding on the host so far): each core loads its indices into
LX once, then for every output row issues one indirect load, a DMA whose source row is the int32
it reads in LX (``index_lx``), and stores the row. The engine times a load by its address, and
the address of a row picked by data is not known when the program is lowered, so the lowering
gives lookup r the address of table row r mod V (V rows): distinct, consecutive rows, as many
DRAM pages as the real lookups touch when the tokens differ. Functional runs read the real rows.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, TensorLayout, dim_map, elems_per_stick
from ..kernel_program.model import Kernel
from .placement import as_runs, stick_of
from .streams import CoreStreams, Emit, Item
from .target import Stepper, Target

INDEX_BYTES = 4  # int32


def lower_embedding(core: CoreStreams, *, names: tuple[str, str, str], rows: list[int], index: TensorLayout,
                    table: TensorLayout, y: TensorLayout, budget: int, step: Stepper) -> None:
    """One core's output ``rows``: their indices into LX at 0, then the rows through double-buffered chunks."""
    table_name, index_name, y_name = names
    ids = stick_of(index, np.array([rows]))
    first, sticks = int(ids.min()), int(ids.max()) - int(ids.min()) + 1
    fetch = core.dma("load", index_name, [(first, sticks)], 0)
    fetch[-1].setdefault("signal", []).append(f"{core.tag}index")
    lanes = elems_per_stick(index.dtype)
    width = _row_sticks(y)
    per_set = step(len(rows), (budget - sticks) // (2 * width))
    pitch = _pitch(table) * STICK_BYTES
    for q, start in enumerate(range(0, len(rows), per_set)):
        at = (sticks + (q % 2) * per_set * width) * STICK_BYTES
        loads: list[Item] = []
        stores: list[Item] = []
        for i, r in enumerate(rows[start:start + per_set]):
            lx = at + i * width * STICK_BYTES
            for item in core.dma("load", table_name, as_runs(_row_ids(table, r % table.shape[0])), lx):
                item.update(index_lx=(int(stick_of(index, np.array([[r]]))[0]) - first) * STICK_BYTES
                            + r % lanes * INDEX_BYTES, index_row=r % table.shape[0], index_rows=table.shape[0],
                            index_pitch=pitch)
                loads.append(item)
            stores += core.dma("store", y_name, as_runs(_row_ids(y, r)), lx)
        if q == 0:
            loads[0].setdefault("wait", []).append(f"{core.tag}index")
        loads[-1].setdefault("signal", []).append(f"{core.tag}q{q}.loaded")
        stores[0].setdefault("wait", []).append(f"{core.tag}q{q}.loaded")
        core.wire_chunk(q, loads, {}, stores)


def _row_sticks(layout: TensorLayout) -> int:
    return -(-layout.shape[1] // elems_per_stick(layout.dtype))


def _pitch(table: TensorLayout) -> int:
    """Sticks between consecutive table rows."""
    return int(_row_ids(table, 1)[0] - _row_ids(table, 0)[0]) if table.shape[0] > 1 else 0


def _row_ids(layout: TensorLayout, row: int) -> np.ndarray:
    """The device sticks of one row of a 2-D tensor, in column order."""
    cols = np.arange(_row_sticks(layout)) * elems_per_stick(layout.dtype)
    return stick_of(layout, np.stack([np.full_like(cols, row), cols]))


def plan_embedding(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check an embedding kernel and return each core's share: a slice of the output rows."""
    src, where = target.program.source, kernel.path
    table, index, y = (t.layout for t in tensors)
    n = index.shape[0] if len(index.shape) == 1 else -1
    if (len(table.shape) != 2 or len(index.shape) != 1 or index.dtype != "int32" or y.dtype != table.dtype
            or y.shape != (n, table.shape[1])):
        raise ProgramError(f"embedding reads a (rows, width) table and (n,) int32 indices into an (n, width) "
                           f"output of the table's dtype: table {list(table.shape)} {table.dtype}, indices "
                           f"{list(index.shape)} {index.dtype}, output {list(y.shape)} {y.dtype}", src, where)
    if dim_map(table)[-1] != 1 or dim_map(y)[-1] != 1:
        raise ProgramError("embedding moves whole rows: the table's and the output's stick dim must be their last",
                           src, where)
    _check_rows(table, (src, where + ".inputs[0]"))
    slices = list(kernel.slices.values())
    if list(kernel.dims.values()) != list(y.shape) or any(s > 1 for s in slices[1:]) or n % slices[0]:
        raise ProgramError(f"dims equal to the output's shape {list(y.shape)}, split into equal slices of rows only",
                           src, where + ".work_division")
    per = n // slices[0]
    return {c: partial(lower_embedding, names=tuple(t.name for t in tensors), rows=list(range(c * per, (c + 1) * per)),
                       index=index, table=table, y=y, budget=target.budget, step=target.stepper(kernel))
            for c in range(slices[0])}


def _check_rows(table: TensorLayout, where: tuple[str, str]) -> None:
    """Every table row must be the first row's sticks moved by one stride (an indirect load moves its
    address by whole rows)."""
    first, last = _row_ids(table, 0), table.shape[0] - 1
    if not np.array_equal(_row_ids(table, last), first + last * _pitch(table)):
        raise ProgramError("the table's rows are not one pattern of sticks a stride apart", *where)
