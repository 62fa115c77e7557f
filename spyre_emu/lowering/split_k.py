"""Split K: the cores of a K group each hold a partial C tile; they reduce it around the ring.

A ring reduce-scatter, as collectives run on a ring: the tile's sticks (in LX order: column group,
then row) are cut into one chunk per member, and the members, in core order, form a ring. In step
s (0 .. members - 2), member p sends its running sum of chunk (p - s) mod members to member p + 1,
which adds it into its own on one SFU (``sfu0``: under the default "unichain" PSUM path one corelet per
core does the reduction and its partner takes no part, as public readings of IBM's backend say;
docs/decisions/fidelity.md) and sends that sum on in the next step. After the last step member p holds chunk
(p + 1) mod members whole and stores it. Every transfer is to the next member, so each member
sends (members - 1) / members of a tile once, over the links to its neighbour: the reduction takes
about as long for 2 members as for 32. A member's receive area holds one slot per step, right after
its C tile; a slot is sent into again only after the adds of the previous tile have read it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..config import STICK_BYTES
from .placement import Runs, cut_runs, run_sticks
from .streams import CoreStreams, Item


@dataclass(frozen=True)
class SplitK:
    kernel: str      # prefix of the kernel's card-wide tokens
    members: int     # cores in a K group
    piece_max: int   # sticks of the largest piece
    recv_lx: int     # LX of the receive area (members - 1 slots of piece_max sticks)


def tile_sticks(rows: int, groups: int, split: int) -> int:
    """LX sticks of a C tile and, with K split over ``split`` cores, its receive area."""
    tile = rows * groups
    return tile + (split - 1) * -(-tile // split) if split > 1 else tile


def reduce_tile(core: CoreStreams, split: SplitK, group: tuple[int, ...], t: int, runs: Runs, before: int,
                c_lx: int, c_name: str, last_passes: list[Item], memo: dict) -> list[Item]:
    """Append this core's part of tile ``t``'s reduction (``before``: sticks of tile t - 1, 0 if none);
    returns the instructions after which C's LX may be written again (its last send, adds and store).
    ``memo``: the kernel's reduction steps by core and tile sizes (``_steps``)."""
    members, me = len(group), group.index(core.core)
    sticks = run_sticks(runs)
    key = ("reduce", core.core, group, sticks, before, c_lx)
    if key not in memo:
        memo[key] = _steps(split, group, core.core, sticks, before, c_lx)
    now, then = f"{split.kernel}t{t}.".__add__, f"{split.kernel}t{t - 1}.".__add__  # as _token(split, t or t - 1)
    sends: list[Item] = []
    adds: dict[str, list[Item]] = {}
    for unit, fixed, waits, earlier, signals in memo[key]:
        wait, signal = [*map(now, waits), *map(then, earlier)], [*map(now, signals)]
        item = core.add(unit, {**fixed, "wait": wait, "signal": signal})
        (sends if unit == "send" else adds.setdefault(unit, [])).append(item)
    for i, p in enumerate(last_passes):  # the partial tile is whole before any of it is sent or added to
        for j, first in enumerate([*sends[:1], *(ops[0] for ops in adds.values())]):
            token = f"{core.tag}t{t}.done{i}>{j}"
            p.setdefault("signal", []).append(token)
            first.setdefault("wait", []).append(token)
    cuts = _cuts(sticks, members)
    lo, hi = cuts[(me + 1) % members], cuts[(me + 1) % members + 1]
    last = [*sends[-1:], *(ops[-1] for ops in adds.values())]
    if hi == lo:
        return last
    stores = core.dma("store", c_name, cut_runs(runs, lo, hi), c_lx + lo * STICK_BYTES)
    for u, ops in adds.items():
        ops[-1]["signal"].append(f"{core.tag}t{t}.added>{u}")
        stores[0].setdefault("wait", []).append(f"{core.tag}t{t}.added>{u}")
    return [*last, stores[-1]]


Step = tuple[str, Item, list[str], list[str], list[str]]  # unit, args, waits (tile t, t - 1), signals


def _steps(split: SplitK, group: tuple[int, ...], core: int, sticks: int, before: int, c_lx: int) -> list[Step]:
    """A member's sends and adds of one tile's reduction, in order, their tokens without the tile's
    prefix: the same for every tile of ``sticks`` sticks after one of ``before``."""
    members, me = len(group), group.index(core)
    cuts, earlier = _cuts(sticks, members), _cuts(before, members)
    after = group[(me + 1) % members]
    out: list[Step] = []
    for s in range(members - 1):
        sent, into = (me - s) % members, (me - 1 - s) % members  # the chunk sent on, the chunk received
        lo, hi = cuts[sent], cuts[sent + 1]
        if hi > lo:
            fixed = {"op": "send", "lx": c_lx + lo * STICK_BYTES, "to_core": after, "to_lx": _slot(split, s),
                     "bytes": (hi - lo) * STICK_BYTES}
            waits = [f"a{core}s{s - 1}.{u}" for u in _adder(hi - lo)] if s else []
            freed = [f"f{after}s{s}.{u}" for u in _adder(earlier[sent + 1] - earlier[sent])]
            out.append(("send", fixed, waits, freed, [f"r{after}s{s}.{u}" for u in _adder(hi - lo)]))
        lo, hi = cuts[into], cuts[into + 1]
        for u, (a, b) in _adder(hi - lo).items():
            fixed = {"op": "add", "a": c_lx + (lo + a) * STICK_BYTES, "b": _slot(split, s) + a * STICK_BYTES,
                     "out": c_lx + (lo + a) * STICK_BYTES, "sticks": b - a}
            signals = [f"f{core}s{s}.{u}", *([f"a{core}s{s}.{u}"] if s < members - 2 else [])]
            out.append((u, fixed, [f"r{core}s{s}.{u}"], [], signals))
    return out


def _adder(n: int) -> dict[str, tuple[int, int]]:
    """The SFU that adds a received chunk of ``n`` sticks, and its span of them: all on ``sfu0``."""
    return {"sfu0": (0, n)} if n > 0 else {}


def _cuts(sticks: int, members: int) -> list[int]:
    return [i * sticks // members for i in range(members + 1)]


def _slot(split: SplitK, step: int) -> int:
    """Where in a member's receive area the piece of reduction step ``step`` lands."""
    return split.recv_lx + step * split.piece_max * STICK_BYTES
