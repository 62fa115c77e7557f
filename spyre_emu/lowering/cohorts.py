"""Cohorts: which cores share an operand's sticks, and which of them loads them for all.

Cores whose pieces need the same sticks of A (same batches, rows and K range) or of B (same
batches, column groups and K range) form cohorts of at most ``dma.multicast_max_cores``, in core
order; the first member loads the operand with one multicast into every member's LX. Sharing
asks for pieces of the same size (an even division), so that every member runs the same chunks
in the same order into the same LX addresses; pieces of other sizes load their own operands.
Cores with the same batches, rows and column groups but different K ranges form the K group
that reduces their partial sums.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace

from ..config import STICK_BYTES


@dataclass(frozen=True)
class Piece:
    """One core's share of a matmul: (first, count) of rows, column groups and K sticks per batch,
    and who it shares with."""

    core: int
    batches: tuple[int | None, ...]
    m: tuple[int, int]
    g: tuple[int, int]
    k: tuple[int, int]
    a_cohort: tuple[int, ...] = ()  # the cores sharing this core's A sticks, this one included, in core order
    b_cohort: tuple[int, ...] = ()
    k_group: tuple[int, ...] = ()  # the cores reducing partial sums with this one, in K order

    @property
    def size(self) -> tuple[int, int, int, int]:
        return len(self.batches), self.m[1], self.g[1], self.k[1]


def cohorts(pieces: list[Piece], limit: int) -> list[Piece]:
    """The pieces with their A and B cohorts and K groups filled in."""
    a_cohort = _share(pieces, lambda p: (p.batches, p.m, p.k), limit)
    b_cohort = _share(pieces, lambda p: (p.batches, p.g, p.k), limit)
    groups = defaultdict(list)
    for p in pieces:
        groups[(p.batches, p.m, p.g)].append(p)
    k_group = {p.core: tuple(q.core for q in sorted(group, key=lambda q: q.k)) for group in groups.values()
               for p in group}
    return [replace(p, a_cohort=a_cohort[p.core], b_cohort=b_cohort[p.core], k_group=k_group[p.core])
            for p in pieces]


def share(tile: list[tuple[list[tuple[int, int]], int]], parts: int) -> list[list[tuple[list[tuple[int, int]], int]]]:
    """A tile (runs of device sticks, each list to its LX address) cut into ``parts`` tiles of whole runs, in
    order, their run counts differing by at most one: none is empty while the tile has at least ``parts`` runs
    (``loaders``). A list's runs that fall in one part stay one list, at the LX address of its first run."""
    size, extra = divmod(sum(len(group) for group, _ in tile), parts)
    bounds = [p * size + min(p, extra) for p in range(parts + 1)]
    out: list[list[tuple[list[tuple[int, int]], int]]] = [[] for _ in range(parts)]
    p, pos = 0, 0  # the part, and the index in the whole tile of the current list's first run
    for group, at in tile:
        lo = pos
        while lo < pos + len(group):
            while bounds[p + 1] <= lo:
                p += 1
            hi = min(pos + len(group), bounds[p + 1])
            before = sum(n for _, n in group[:lo - pos]) if lo > pos else 0
            out[p].append((group[lo - pos:hi - pos], at + before * STICK_BYTES))
            lo = hi
        pos += len(group)
    return out


def loaders(cohort: tuple[int, ...], fewest_runs: int) -> tuple[int, ...]:
    """The members that load a share of the operand in every chunk: as many as the chunk with the
    fewest runs can give one run each, so every chunk has the same loaders (each handshake token of
    a chunk is then signalled and awaited once)."""
    return cohort[:max(1, min(len(cohort), fewest_runs))]


def _share(pieces: list[Piece], key, limit: int) -> dict[int, tuple[int, ...]]:
    """Each piece's cohort: the pieces with the same ``key`` and size, in groups of at most ``limit``."""
    return cohorts_of({p.core: (key(p), p.size) for p in pieces}, limit)


def cohorts_of(keys: Mapping[int, Hashable], limit: int) -> dict[int, tuple[int, ...]]:
    """Each core's cohort: the cores with the same key (the same sticks to load), in core order, in groups of
    at most ``limit``; the first of a group loads for all of it."""
    same = defaultdict(list)
    for core, key in keys.items():
        same[key].append(core)
    cohort = {}
    for cores in same.values():
        cores.sort()
        for i in range(0, len(cores), limit):
            cohort.update(dict.fromkeys(cores[i:i + limit], tuple(cores[i:i + limit])))
    return cohort


def addressed(piece: Piece, shape: tuple[int, int], split_k: int) -> tuple[list[tuple[int, int]] | None, ...]:
    """The host boxes of A, B and C (``shape``: N, K) whose every stick the core of ``piece`` loads or stores,
    or None where that depends on the lowering: an operand a cohort shares is loaded in shares, and with K split
    each core of a K group stores a piece of the tile (spans.check_boxes)."""
    (n, k), x = shape, piece.batches
    lead = [(x[0], x[-1] + 1)] if x[0] is not None else []
    rows, ks = (piece.m[0], sum(piece.m)), (piece.k[0] * 64, min(sum(piece.k) * 64, k))
    cols = (piece.g[0] * 64, min(sum(piece.g) * 64, n))
    return ([*lead, rows, ks] if piece.a_cohort == (piece.core,) else None,
            [*lead, ks, cols] if piece.b_cohort == (piece.core,) else None,
            [*lead, rows, cols] if split_k == 1 else None)
