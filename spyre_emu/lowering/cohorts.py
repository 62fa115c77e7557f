"""Matmul cohorts: which cores share an operand's sticks, and which of them loads them for all.

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
from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Piece:
    """One core's share of a matmul: (first, count) of rows, column groups and K sticks per batch,
    and who it shares with."""

    core: int
    batches: tuple[int | None, ...]
    m: tuple[int, int]
    g: tuple[int, int]
    k: tuple[int, int]
    a_feed: tuple[int, ...] = ()   # the cores this core's A loads fill (empty: another core loads its A)
    b_feed: tuple[int, ...] = ()
    a_from: int = -1               # the core whose loads bring this core's A
    b_from: int = -1
    k_group: tuple[int, ...] = ()  # the cores reducing partial sums with this one, in K order

    @property
    def size(self) -> tuple[int, int, int, int]:
        return len(self.batches), self.m[1], self.g[1], self.k[1]


def cohorts(pieces: list[Piece], limit: int) -> list[Piece]:
    """The pieces with their A and B cohorts and K groups filled in."""
    a_feed, a_from = _share(pieces, lambda p: (p.batches, p.m, p.k), limit)
    b_feed, b_from = _share(pieces, lambda p: (p.batches, p.g, p.k), limit)
    groups = defaultdict(list)
    for p in pieces:
        groups[(p.batches, p.m, p.g)].append(p)
    k_group = {p.core: tuple(q.core for q in sorted(group, key=lambda q: q.k)) for group in groups.values()
               for p in group}
    return [replace(p, a_feed=a_feed.get(p.core, ()), b_feed=b_feed.get(p.core, ()), a_from=a_from[p.core],
                    b_from=b_from[p.core], k_group=k_group[p.core]) for p in pieces]


def _share(pieces: list[Piece], key, limit: int) -> tuple[dict[int, tuple[int, ...]], dict[int, int]]:
    """Cohorts of pieces with the same ``key`` and size: each leader's members, each piece's leader."""
    same = defaultdict(list)
    for p in pieces:
        same[(key(p), p.size)].append(p.core)
    feed, source = {}, {}
    for cores in same.values():
        cores.sort()
        for i in range(0, len(cores), limit):
            members = tuple(cores[i:i + limit])
            feed[members[0]] = members
            source.update(dict.fromkeys(members, members[0]))
    return feed, source
