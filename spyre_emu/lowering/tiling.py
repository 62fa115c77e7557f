"""Matmul tiling: how a core's share is cut into C tiles and K chunks in LX, and which operand stays in LX.

A core owns R rows of C, G column groups (64 columns each) and K_c K sticks. It computes C a tile at a
time: at most ``pt.max_tile_rows`` rows (a row block) by a block of column groups, streaming its K range
in double-buffered chunks of A and B. Each row block needs all of B, each column block all of the
rows' A. Streaming both (``keep`` "") reads B once per row block and A once per column block. A
compiler that cannot fit everything in LX keeps one operand stationary instead when its whole K range
fits beside the other's two chunk buffers and the C tile: A across a row block's column blocks
(``keep`` "A"), or B across a column block's row blocks (``keep`` "B", columns then the outer loop). The
plan takes whichever loads the fewest sticks into the core's LX (ties: streaming both, then A, then B).
Under split K a core streams both, as silicon's K splits do. A batched core's tile is one output stick of
a block of batches (matmul.py): silicon reads a block's A again per output stick (docs/decisions/fidelity.md);
B it keeps across row blocks when it fits, else it streams both. Row blocks that must be cut anyway, or those of a
core holding every batch, are sized to hold all its batches where 8 rows do (``rows_for_batches``).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import STICK_BYTES
from .split_k import SplitK, tile_sticks

KEEPS = ("", "A", "B")  # the order ties are broken in


@dataclass(frozen=True)
class Plan:
    """The LX layout every core of the kernel shares, and how K and N are cut into chunks and tiles."""

    kernel: str          # prefix of the kernel's card-wide tokens
    k: int               # K in elements
    rows: int            # the most rows of C a core owns (A's tile height)
    block: int           # column groups per tile
    chunk: int           # K sticks per chunk
    batches: int         # batches per block (1 for 2-D)
    rows_per_pass: int
    split: SplitK | None  # the K reduction's receive area, when K is split
    keep: str = ""       # the operand that stays in LX across tiles ("A", "B"), or "" (both streamed)
    k_sticks: int = 0    # the most K sticks a core owns (the kept operand's K range)
    a_order: tuple[str, ...] = ("k", "rows")  # A's dims in LX, outermost first: its layout's order (``lx_order``)
    b_order: tuple[str, ...] = ("groups", "k")  # B's: "batch", "k" (its K rows) and "groups"
    c_tiles: int = 1     # C buffers: with two, a tile's passes start while the one before is stored
    pts: tuple[str, ...] = ("pt0", "pt1")  # the PT arrays that take the passes, in turn

    def c_at(self, t: int) -> int:
        """LX of tile ``t``'s C."""
        return self.c_lx + (t % self.c_tiles) * self.rows * self.block * self.batches * STICK_BYTES

    @property
    def a_bytes(self) -> int:
        """LX of A: one chunk buffer, or all of a row block's K range when A is kept."""
        return (self.k_sticks if self.keep == "A" else self.chunk) * self.rows * self.batches * STICK_BYTES

    @property
    def b_bytes(self) -> int:
        """LX of B: one chunk buffer, or all of a column block's K range when B is kept."""
        return self.block * self.b_rows * self.batches * STICK_BYTES

    @property
    def b_rows(self) -> int:
        """K rows of B's buffer: a chunk's, or the whole K range of a kept B."""
        return (self.k_sticks if self.keep == "B" else self.chunk) * 64

    def a_strides(self, batches: int, k_sticks: int) -> dict[str, int]:
        """LX sticks between A's batches, rows and K sticks in a tile of ``batches`` and a chunk of ``k_sticks``
        (a kept A: its whole K range), nested in ``a_order`` over the plan's rows: a DRAM run is an LX run."""
        return _strides(self.a_order, {"batch": batches, "rows": self.rows,
                                       "k": self.k_sticks if self.keep == "A" else k_sticks})

    def b_strides(self, batches: int) -> dict[str, int]:
        """LX sticks between B's batches, K rows and column groups in a tile of ``batches``, nested in
        ``b_order`` over the plan's column block."""
        return _strides(self.b_order, {"batch": batches, "groups": self.block, "k": self.b_rows})

    def k_rows(self, ks: tuple[int, int]) -> int:
        """K rows of chunk ``ks`` (first K stick, count): B has exactly K rows; A's last stick is padded."""
        return min(ks[1] * 64, self.k - ks[0] * 64)

    def buffers(self, n: int, offset: int) -> tuple[int, int]:
        """LX of A and B for chunk ``n``, ``offset`` K sticks into the core's K range: a streamed operand
        alternates between two buffers; a kept one has its K range in one place, the chunk at its offset."""
        if self.keep == "A":
            step = self.a_strides(self.batches, 0)["k"]
            return offset * step * STICK_BYTES, self.a_bytes + (n % 2) * self.b_bytes
        if self.keep == "B":
            step = 64 * self.b_strides(self.batches)["k"]
            return self.b_bytes + (n % 2) * self.a_bytes, offset * step * STICK_BYTES
        base = (n % 2) * (self.a_bytes + self.b_bytes)
        return base, base + self.a_bytes

    @property
    def c_lx(self) -> int:
        return (1 if self.keep == "A" else 2) * self.a_bytes + (1 if self.keep == "B" else 2) * self.b_bytes


def _strides(order: tuple[str, ...], extents: dict[str, int]) -> dict[str, int]:
    """Each dim's stride when dims of these extents nest in ``order`` (outermost first); 0 for a dim not in it
    (a 2-D operand's batch)."""
    out, step = dict.fromkeys(extents, 0), 1
    for dim in reversed(order):
        out[dim], step = step, step * extents[dim]
    return out


def tile_chunk(k_sticks: int, rows: int, groups: int, lx_sticks: int, split: int = 1, batches: int = 1,
               keep: str = "") -> int:
    """The largest K chunk (in A sticks) whose two buffers of each streamed operand fit beside the C tile
    (and, with K split over ``split`` cores, the receive area of the reduction) and the kept operand's whole
    K range, for a block of ``batches``.

    One A stick holds 64 K values of a row; the same 64 K values of B are 64 sticks per group.
    """
    a, b = rows * batches, 64 * groups * batches  # sticks per K stick of the A tile and of the B block
    free = lx_sticks - tile_sticks(rows * batches, groups, split) - k_sticks * {"A": a, "B": b}.get(keep, 0)
    per_stick = 2 * ((a if keep != "A" else 0) + (b if keep != "B" else 0))
    if free < per_stick:
        return 0
    return min(k_sticks, free // per_stick)


def least_chunk(k_sticks: int) -> int:
    """The fewest K sticks a chunk may hold when a plan trades chunk length for LX: 8, or all a core has."""
    return min(8, k_sticks)


def column_block(k_sticks: int, rows: int, groups: int, lx_sticks: int, split: int = 1, batches: int = 1,
                 keep: str = "") -> int:
    """Column groups a core computes at a time: all of them if a K chunk of 8 sticks still fits."""
    fits = [g for g in range(1, groups + 1)
            if tile_chunk(k_sticks, rows, g, lx_sticks, split, batches, keep) >= least_chunk(k_sticks)]
    return fits[-1] if fits else 0


def batch_block(k_sticks: int, rows: int, groups: int, batches: int, lx_sticks: int, split: int) -> int:
    """Batches a core computes at a time: as many of its own as still let all its column groups and
    a K chunk of 8 sticks fit (at least one)."""
    fits = [b for b in range(1, batches + 1) if column_block(k_sticks, rows, groups, lx_sticks, split, b) == groups]
    return fits[-1] if fits else 1


def rows_for_batches(k_sticks: int, rows: int, batches: int, lx_sticks: int, split: int, step: int) -> int:
    """The most rows (a multiple of ``step``, at most ``rows``) of a tile that holds all ``batches`` of a core
    with one output stick and a K chunk of 8 sticks; 0 if not even ``step`` rows do."""
    return next((r for r in range(rows - rows % step, 0, -step)
                 if column_block(k_sticks, r, 1, lx_sticks, split, batches) == 1), 0)


def stationary(k_sticks: int, rows: tuple[int, int], groups: int, lx_sticks: int, split: int) -> tuple[str, int]:
    """The operand a 2-D core keeps in LX ("" for none) and its column block: of the choices that fit, the
    one that loads the fewest sticks, for ``rows`` = (rows of C a core owns, rows per row block); ("", 0) if
    nothing fits. Only a core that holds whole sums keeps an operand (``split`` 1): silicon's K splits read B
    once per row block even where it would fit (docs/decisions/fidelity.md), for reasons not known."""
    owned, per_block = rows
    row_blocks = -(-owned // per_block)
    a, b = owned * k_sticks, 64 * groups * k_sticks  # a core's A and B, in sticks
    loads = {"": lambda cols: cols * a + row_blocks * b, "A": lambda cols: a + row_blocks * b,
             "B": lambda cols: cols * a + b}
    best: tuple[int, str, int] | None = None
    for keep in KEEPS if split == 1 else ("",):
        block = column_block(k_sticks, per_block, groups, lx_sticks, split, 1, keep)
        cost = loads[keep](-(-groups // block)) if block else None
        if cost is not None and (best is None or cost < best[0]):
            best = (cost, keep, block)
    return (best[1], best[2]) if best else ("", 0)
