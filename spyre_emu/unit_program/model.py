"""The unit program after loading: buffers at resolved addresses and per-unit streams.

Addresses are plain integers here: symbolic DRAM addresses were patched at load time,
as the real runtime patches programs at launch.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .columns import Columns

HOST_CORE = -1  # the ``core`` of host (PCIe) instructions


@dataclass(frozen=True)
class Buffer:
    """A named DRAM allocation; ``input``/``output`` name .npy files for functional runs.

    ``input`` is relative to the program file; ``output`` to the run's output directory.
    """

    name: str
    addr: int
    nbytes: int
    dtype: str
    shape: tuple[int, ...] | None
    input: Path | None
    output: Path | None
    fill: str | float | tuple[float, ...]  # "zeros", "random" (seeded by the name), a value for every
                                           # element, or values repeated over the buffer


@dataclass(frozen=True, slots=True, init=False)
class Instruction:
    """One instruction of one unit; ``path`` is where it sits in the JSON, for errors. Slotted: a
    program holds thousands, and a ``__dict__`` each would double the objects the garbage collector
    walks (speed.md, session 33). Its own ``__init__`` sets the slots through their descriptors: a frozen
    dataclass's generated one calls ``object.__setattr__`` per field, twice as slow (speed.md, session 34)."""

    core: int
    unit: str
    op: str
    args: dict[str, int | str | bool]
    wait: tuple[str, ...]
    signal: tuple[str, ...]
    path: str
    kernel: str = ""  # the kernel-program kernel it was lowered from ("" in hand-written programs)

    def __init__(self, core: int, unit: str, op: str, args: dict[str, int | str | bool], wait: tuple[str, ...],
                 signal: tuple[str, ...], path: str, kernel: str = "") -> None:
        set_core, set_unit, set_op, set_args, set_wait, set_signal, set_path, set_kernel = _SLOT_SETTERS
        set_core(self, core)
        set_unit(self, unit)
        set_op(self, op)
        set_args(self, args)
        set_wait(self, wait)
        set_signal(self, signal)
        set_path(self, path)
        set_kernel(self, kernel)

    def __reduce__(self) -> tuple:
        """Pickled as a constructor call: a slotted frozen dataclass's own ``__setstate__`` sets each
        field through Python, twice as slow to unpickle as a ``__dict__`` (the result cache reads
        thousands of instructions per warm call)."""
        return Instruction, (self.core, self.unit, self.op, self.args, self.wait, self.signal, self.path, self.kernel)


_SLOT_SETTERS = tuple(getattr(Instruction, f.name).__set__ for f in fields(Instruction))


@dataclass(frozen=True)
class UnitProgram:
    """Streams keyed by (core, unit name), in core then unit order; host streams use HOST_CORE.
    ``columns``: the same instructions as arrays (columns.build_columns), what the engine packs."""

    source: str
    buffers: dict[str, Buffer]
    streams: dict[tuple[int, str], tuple[Instruction, ...]]
    columns: Columns = field(repr=False, compare=False)

    def instructions(self) -> list[Instruction]:
        return list(self.columns.instructions)


def dma_shape(args: dict) -> tuple[int, int, int]:
    """A DMA's bytes, piece and stride: ``bytes / piece`` pieces ``stride`` apart in DRAM (a strided
    descriptor), or one piece of all its bytes."""
    total = args["bytes"]
    piece = args.get("piece", total)
    return total, piece, args.get("stride", piece)


def dram_pieces(args: dict) -> list[tuple[int, int]]:
    """(DRAM address, bytes) of each piece a DMA moves (``dma_shape``)."""
    total, piece, stride = dma_shape(args)
    return [(args["dram"] + i * stride, piece) for i in range(total // piece)]


def lx_pieces(args: dict) -> list[tuple[int, int]]:
    """(LX offset, bytes) of each piece of a DMA's scratchpad side: ``lx_piece`` bytes ``lx_stride`` apart
    from ``lx`` (a pattern on the LX side too), or all its bytes at ``lx``. The bytes pair up in order
    with ``dram_pieces``', whatever either side's cut."""
    total, piece = args["bytes"], args.get("lx_piece", args["bytes"])
    return [(args["lx"] + i * args.get("lx_stride", piece), piece) for i in range(total // piece)]


def lx_span(args: dict) -> int:
    """Bytes from a DMA's first LX byte to its last."""
    total, piece = args["bytes"], args.get("lx_piece", args["bytes"])
    return (total // piece - 1) * args.get("lx_stride", piece) + piece


def dram_span(args: dict) -> int:
    """Bytes from a DMA's first DRAM byte to its last."""
    total, piece, stride = dma_shape(args)
    return (total // piece - 1) * stride + piece


def matmul_a_sticks(args: dict, dtype_bytes: int) -> tuple[int, int, int]:
    """(sticks per A row, sticks between a row's consecutive k-sticks, sticks between rows).

    By default A rows lie one after another, each its k elements in whole sticks; a tile kept
    in the device layout (k-sticks outermost, rows inside) sets ``a_k_stride`` to its row count
    and ``a_row_stride`` to 1.
    """
    per_row = -(-args["k"] * dtype_bytes // 128)
    return per_row, args.get("a_k_stride", 1), args.get("a_row_stride", per_row)


def matmul_c_sticks(args: dict, cols: int) -> tuple[int, int]:
    """(sticks per C row, sticks between rows): C rows are fp16, each padded to whole sticks; by default one
    after another, ``c_row_stride`` sticks apart when given (a C kept in LX in its tensor's own place)."""
    per_row = -(-cols * 2 // 128)
    return per_row, args.get("c_row_stride", per_row)


STEPS = ("a_step", "b_step", "c_step")


def matmul_repeat(args: dict) -> int:
    """How many passes a matmul instruction runs back to back (its ``repeat``, default 1)."""
    return int(args.get("repeat", 1))


def matmul_passes(args: dict) -> list[dict]:
    """A matmul's passes, one after another: ``repeat`` of them, pass i at a, b and c moved on by
    i times ``a_step``, ``b_step`` and ``c_step`` bytes."""
    n = matmul_repeat(args)
    if n == 1:
        return [args]
    return [{**args, "a": args["a"] + i * args.get("a_step", 0), "b": args["b"] + i * args.get("b_step", 0),
             "c": args["c"] + i * args.get("c_step", 0), "repeat": 1} for i in range(n)]
