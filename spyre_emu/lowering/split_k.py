"""Split K: the cores of a K group each hold a partial C tile; they reduce it around the ring.

A ring reduce-scatter, as collectives run on a ring: the tile's sticks (in LX order: column group,
then row) are cut into one chunk per member, and the members, in core order, form a ring. In step
s (0 .. members - 2), member p sends its running sum of chunk (p - s) mod members to member p + 1,
which adds it into its own on its two SFUs (one half of the chunk each, so the adds into one stick
stay in order) and sends that sum on in the next step. After the last step member p holds chunk
(p + 1) mod members whole and stores it. Every transfer is to the next member, so each member
sends (members - 1) / members of a tile once, over the links to its neighbour: the reduction takes
about as long for 2 members as for 32. A member's receive area holds one slot per step, right after
its C tile; a slot is sent into again only after the adds of the previous tile have read it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import STICK_BYTES
from .placement import Runs, as_runs
from .streams import CoreStreams, Item, halves


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
                c_lx: int, c_name: str, last_passes: list[Item]) -> list[Item]:
    """Append this core's part of tile ``t``'s reduction (``before``: sticks of tile t - 1, 0 if none);
    returns the instructions after which C's LX may be written again (its last send, adds and store)."""
    members, me = len(group), group.index(core.core)
    ids = np.concatenate([np.arange(first, first + n) for first, n in runs])
    cuts, earlier = _cuts(ids.size, members), _cuts(before, members)
    after = group[(me + 1) % members]
    sends: list[Item] = []
    adds: dict[str, list[Item]] = {}
    for s in range(members - 1):
        out, into = (me - s) % members, (me - 1 - s) % members  # the chunk sent on, the chunk received
        lo, hi = cuts[out], cuts[out + 1]
        if hi > lo:
            item = core.add("send", {"op": "send", "lx": c_lx + lo * STICK_BYTES, "to_core": after,
                                     "to_lx": _slot(split, s), "bytes": (hi - lo) * STICK_BYTES})
            item["signal"] = [_token(split, t, f"r{after}s{s}.{u}") for u in halves(hi - lo)]
            item["wait"] = [_token(split, t, f"a{core.core}s{s - 1}.{u}") for u in halves(hi - lo)] if s else []
            if earlier[out + 1] > earlier[out]:  # the receiver's adds of tile t - 1 read this slot
                item["wait"] += [_token(split, t - 1, f"f{after}s{s}.{u}")
                                 for u in halves(earlier[out + 1] - earlier[out])]
            sends.append(item)
        lo, hi = cuts[into], cuts[into + 1]
        for u, (a, b) in halves(hi - lo).items():
            signal = [_token(split, t, f"f{core.core}s{s}.{u}")]
            if s < members - 2:
                signal.append(_token(split, t, f"a{core.core}s{s}.{u}"))
            adds.setdefault(u, []).append(core.add(u, {
                "op": "add", "a": c_lx + (lo + a) * STICK_BYTES, "b": _slot(split, s) + a * STICK_BYTES,
                "out": c_lx + (lo + a) * STICK_BYTES, "sticks": b - a,
                "wait": [_token(split, t, f"r{core.core}s{s}.{u}")], "signal": signal}))
    for i, p in enumerate(last_passes):  # the partial tile is whole before any of it is sent or added to
        for j, first in enumerate([*sends[:1], *(ops[0] for ops in adds.values())]):
            token = f"{core.tag}t{t}.done{i}>{j}"
            p.setdefault("signal", []).append(token)
            first.setdefault("wait", []).append(token)
    lo, hi = cuts[(me + 1) % members], cuts[(me + 1) % members + 1]
    last = [*sends[-1:], *(ops[-1] for ops in adds.values())]
    if hi == lo:
        return last
    stores = core.dma("store", c_name, as_runs(ids[lo:hi]), c_lx + lo * STICK_BYTES)
    for u, ops in adds.items():
        ops[-1]["signal"].append(f"{core.tag}t{t}.added>{u}")
        stores[0].setdefault("wait", []).append(f"{core.tag}t{t}.added>{u}")
    return [*last, stores[-1]]


def _cuts(sticks: int, members: int) -> list[int]:
    return [i * sticks // members for i in range(members + 1)]


def _token(split: SplitK, t: int, what: str) -> str:
    return f"{split.kernel}t{t}.{what}"


def _slot(split: SplitK, step: int) -> int:
    """Where in a member's receive area the piece of reduction step ``step`` lands."""
    return split.recv_lx + step * split.piece_max * STICK_BYTES
