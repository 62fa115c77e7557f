"""View algebra: a view as a permutation of its base's elements, and the restickify kernels that
move it on the card.

A chain of permutes and reshapes of one value (``view``, ``permute``, ``transpose``, ``clone``,
...) moves no data on the host: the result is ``base.reshape(atoms).permute(perm)`` read in
row-major order (an ``Order``). Composing a permute needs the atoms to be fine enough for the
permuted dims; a common refinement of two shapes (``refine``) gives them, when one exists.

On the card, ``ReStickifyOpHBM`` computes ``y = x.permute(q).reshape(y.shape)`` between default
layouts, stick by stick: the lowering gathers an output stick when it is one input stick lane
for lane, transposes 64 x 64 blocks when every lane of an output stick takes the same lane of
different input sticks, and refuses an output stick that straddles input sticks. ``accepted``
is that rule on shapes; ``plan`` finds one kernel (reading the tensor in its own shape, or, for a gather, in
a finer one: ``gathered_as``), or two through an intermediate whose stick dim is a pivot (neither the input's nor
the output's stick dim), for a view of a device tensor.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

STICK = 64  # fp16 / bf16 elements per 128-byte stick


@dataclass(frozen=True)
class Order:
    """The element order of a view: ``base.reshape(atoms).permute(perm)``, read row-major."""

    atoms: tuple[int, ...]
    perm: tuple[int, ...]

    @staticmethod
    def of(shape: tuple[int, ...]) -> Order:
        """The base's own row-major order (one object per shape: an Order is frozen and compares by
        value, and the layout pass asks for it about 4,700 times in a 40-layer decode)."""
        return _own_order(tuple(shape))

    @property
    def shape(self) -> tuple[int, ...]:
        """The permuted atoms: the view's elements in row-major order over these dims."""
        return tuple(self.atoms[i] for i in self.perm)

    def canonical(self) -> Order:
        """Size-1 atoms dropped and atoms adjacent both in the base and in the view merged, so that
        equal orders compare equal; the base's own order becomes ((n,), (0,)), an empty one ((0,), (0,))."""
        if 0 in self.atoms:
            return Order((0,), (0,))
        keep = [i for i, n in enumerate(self.atoms) if n > 1]
        index = {a: k for k, a in enumerate(keep)}
        perm = [index[i] for i in self.perm if i in index]
        runs: list[list[int]] = []
        for i in perm:
            if runs and runs[-1][-1] + 1 == i:
                runs[-1].append(i)
            else:
                runs.append([i])
        firsts = sorted(r[0] for r in runs)
        atoms = tuple(math.prod(self.atoms[keep[i]] for i in r) for r in sorted(runs))
        return Order(atoms or (1,), tuple(firsts.index(r[0]) for r in runs) or (0,))


@functools.lru_cache(maxsize=4096)
def _own_order(shape: tuple[int, ...]) -> Order:
    return Order(shape, tuple(range(len(shape)))).canonical()


def refine(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The coarsest shape whose consecutive dims multiply into each dim of ``a`` and of ``b`` (size-1
    dims ignored), or None when there is none, as for (4, 6) and (6, 4)."""
    xs, ys = [n for n in a if n > 1], [n for n in b if n > 1]
    out: list[int] = []
    i = j = 0
    x, y = (xs[0] if xs else 1), (ys[0] if ys else 1)
    while i < len(xs) and j < len(ys):
        m = min(x, y)
        if x % m or y % m:
            return None
        out.append(m)
        x, y = x // m, y // m
        if x == 1:
            i += 1
            x = xs[i] if i < len(xs) else 1
        if y == 1:
            j += 1
            y = ys[j] if j < len(ys) else 1
    return tuple(out) if i == len(xs) and j == len(ys) else None


def groups(fine: tuple[int, ...], shape: tuple[int, ...]) -> list[list[int]]:
    """For each dim of ``shape``, the indices of the consecutive dims of ``fine`` (a refinement
    of it) that multiply into it; empty for a dim of size 1."""
    out, at = [], 0
    for n in shape:
        run, left = [], n
        while left > 1:
            run.append(at)
            left //= fine[at]
            at += 1
        out.append(run)
    return out


def is_grouping(shape: tuple[int, ...], dshape: tuple[int, ...]) -> bool:
    """Whether ``dshape`` is ``shape`` with consecutive dims merged: the same row-major elements."""
    return math.prod(shape) == math.prod(dshape) and refine(shape, dshape) == tuple(n for n in shape if n > 1)


def permuted(order: Order, shape: tuple[int, ...], perm: tuple[int, ...]) -> Order | None:
    """The order of ``v.permute(perm)`` for a view ``v`` of ``shape`` in ``order``; None when the
    view's dims cut its atoms in ways no refinement reconciles."""
    fine = refine(order.shape, shape)
    if fine is None:
        return None
    split = groups(fine, order.shape)       # each permuted atom -> its fine pieces
    by_dim = groups(fine, shape)            # each dim of the view -> its fine pieces
    atoms, new_index = [], {}
    for atom in range(len(order.atoms)):    # the base's order: every atom's pieces in turn
        for f in split[order.perm.index(atom)]:
            new_index[f] = len(atoms)
            atoms.append(fine[f])
    new_perm = [new_index[f] for d in perm for f in by_dim[d]]
    return Order(tuple(atoms), tuple(new_perm)).canonical()


def relative(source: Order, target: Order) -> Order | None:
    """``target`` (an order of some base) as an order of the row-major elements of ``source`` (an
    order of the same base): how to read ``target`` out of a tensor holding ``source``."""
    fine = refine(source.atoms, target.atoms)
    if fine is None:
        return None
    src, tgt = _on(source, fine), _on(target, fine)
    position = {atom: k for k, atom in enumerate(src)}  # where each fine atom sits in the source's order
    return Order(tuple(fine[a] for a in src), tuple(position[a] for a in tgt)).canonical()


def _on(order: Order, fine: tuple[int, ...]) -> list[int]:
    """The fine atoms (a refinement of ``order.atoms``) in ``order``'s permuted order."""
    pieces = groups(fine, order.atoms)
    return [f for atom in order.perm for f in pieces[atom]]


Step = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]  # (x shape, perm, y shape) of one kernel


def accepted(x: tuple[int, ...], perm: tuple[int, ...], y: tuple[int, ...]) -> bool:
    """Whether restickify lowers ``y = x.permute(perm).reshape(y)``, both in default layouts.

    An output stick is 64 consecutive elements of a row of ``y``. Where x's stick dim is the
    innermost permuted dim, they must be one input stick lane for lane: the rows of x and y
    agree, or both are whole sticks. Otherwise every lane must take the same lane of x, so the
    stick must not cross a run of the dims permuted inside x's stick dim (``inner``).
    """
    lx, ly = x[-1], y[-1]
    inner = math.prod(x[d] for d in perm[perm.index(len(x) - 1) + 1:])
    if inner == 1:
        return lx == ly or (lx % STICK == 0 and ly % STICK == 0)
    return inner % ly == 0 or (inner % STICK == 0 and ly % STICK == 0)


def plan(order: Order, dx: tuple[int, ...], dy: tuple[int, ...]) -> list[Step] | None:
    """Restickify kernels from a device tensor of shape ``dx`` holding a base's elements in
    row-major order to ``dy`` holding them in ``order``: one kernel (reading x in its own shape, or in the finer
    shape of the first step, ``fine``), or two through a pivot."""
    fine = refine(dx, order.atoms)
    if fine is None:
        return None
    view = _on(order, fine)                       # the fine atoms in the view's order
    owned = groups(fine, dx)                      # each dim of dx -> its fine atoms
    direct = _perm_of(owned, view)
    if direct is not None and accepted(dx, direct, dy):
        return [(dx, direct, dy)]
    if gathered_as(dx, fine, view, dy):
        return [(fine, tuple(view), dy)]
    real = [d for d in range(len(dx)) if owned[d]]
    for first in [real] + [[e for e in real if e != d] + [d] for d in real[:-1]]:
        q = _full(first, len(dx))
        t_atoms = [f for d in first for f in owned[d]]
        t = tuple(fine[f] for f in t_atoms)
        second = tuple(t_atoms.index(f) for f in view)
        if accepted(dx, q, t) and accepted(t, second, dy):
            return [(dx, q, t), (t, second, dy)]
    return None


def gathered_as(dx: tuple[int, ...], fine: tuple[int, ...], perm: list[int], y: tuple[int, ...]) -> bool:
    """Whether ``y = x.reshape(fine).permute(perm).reshape(y)``, x in the default layout of ``dx`` (of which
    ``fine`` is a refinement), gives every output stick one input stick lane for lane: x's innermost atom stays
    innermost, and it and y's rows are whole sticks (runs of it that start where x's sticks do), or both are x's
    rows. One pass then moves the view, where reading x in its own shape needs two: the outer transpose of
    (R * 8, C) read as (R, 8, C), or attention's head split of (S, H * D) read as (S, H, D)."""
    if perm[-1] != len(fine) - 1 or dx[-1] % fine[-1]:  # the innermost atom must be inside x's stick dim (a
        return False                                        # held (n, 1) has one element a stick)
    return (fine[-1] % STICK == 0 and y[-1] % STICK == 0) or fine[-1] == dx[-1] == y[-1]


def _perm_of(owned: list[list[int]], view: list[int]) -> tuple[int, ...] | None:
    """The permutation of x's dims that lists ``view``'s atoms in order, when each dim's atoms stay
    together and in order; size-1 dims go first."""
    starts = {atoms[0]: d for d, atoms in enumerate(owned) if atoms}
    order, at = [], 0
    while at < len(view):
        d = starts.get(view[at])
        if d is None or view[at:at + len(owned[d])] != owned[d]:
            return None
        order.append(d)
        at += len(owned[d])
    return _full(order, len(owned))


def _full(dims: list[int], rank: int) -> tuple[int, ...]:
    """A permutation of all ``rank`` dims: those not listed (size 1) first, then ``dims``."""
    return (*[d for d in range(rank) if d not in dims], *dims)


def lane_dims(x: tuple[int, ...], perm: tuple[int, ...], y: tuple[int, ...]) -> list[int]:
    """The dims of ``y`` that carry x's stick dim when restickify transposes: the output sticks
    that differ only there read the same input sticks (one 64 x 64 block), so a core should
    take them together. None for a gather."""
    permuted_x = tuple(x[d] for d in perm)
    at = perm.index(len(x) - 1)
    fine = refine(permuted_x, y)
    if fine is None or math.prod(permuted_x[at + 1:]) == 1:
        return []
    mine = set(groups(fine, permuted_x)[at])
    return [d for d, run in enumerate(groups(fine, y)) if mine & set(run)]
