"""Split K: the cores of a K group each hold a partial C tile; they reduce it over the ring.

The tile's sticks (in LX order: column group, then row) are cut into one piece per member. Every
member sends each other member that member's piece of its partial tile (a reduce-scatter); the
owner adds what it receives into its own piece on its two SFUs (one half of the piece each, so
the adds into one stick stay in order), then stores the piece. A member's receive area holds one
slot per other member, right after its C tile; a slot is sent into again only after the owner's
adds have read it.
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
    returns the instructions after which C's LX may be written again (its last send and store)."""
    me, ids = group.index(core.core), np.concatenate([np.arange(first, first + n) for first, n in runs])
    cuts, earlier = _cuts(ids.size, len(group)), _cuts(before, len(group))
    sends = []
    for i, owner in enumerate(group):
        if i != me and cuts[i + 1] > cuts[i]:
            item = core.add("send", {"op": "send", "lx": c_lx + cuts[i] * STICK_BYTES, "to_core": owner,
                                     "to_lx": _slot(split, i, me), "bytes": (cuts[i + 1] - cuts[i]) * STICK_BYTES})
            item["signal"] = [_token(split, t, f"r{owner}<{core.core}.{u}") for u in halves(cuts[i + 1] - cuts[i])]
            if earlier[i + 1] > earlier[i]:  # the owner stored its previous piece: its slots were read
                item["wait"] = [_token(split, t - 1, f"x{owner}<{core.core}")]
            sends.append(item)
    lo, hi = cuts[me], cuts[me + 1]
    adds = {u: [_add(core, split, group, t, u, c_lx + (lo + a) * STICK_BYTES, a, b - a, i)
                for i in range(len(group)) if i != me] for u, (a, b) in halves(hi - lo).items()}
    for i, p in enumerate(last_passes):
        for j, first in enumerate([*sends[:1], *(ops[0] for ops in adds.values())]):
            token = f"{core.tag}t{t}.done{i}>{j}"
            p.setdefault("signal", []).append(token)
            first.setdefault("wait", []).append(token)
    if hi == lo:
        return sends[-1:]
    stores = core.dma("store", c_name, as_runs(ids[lo:hi]), c_lx + lo * STICK_BYTES)
    for u, ops in adds.items():
        ops[-1].setdefault("signal", []).append(f"{core.tag}t{t}.added>{u}")
        stores[0].setdefault("wait", []).append(f"{core.tag}t{t}.added>{u}")
    stores[-1]["signal"] = [_token(split, t, f"x{core.core}<{sender}") for sender in group if sender != core.core]
    return [*sends[-1:], stores[-1]]


def _cuts(sticks: int, members: int) -> list[int]:
    return [i * sticks // members for i in range(members + 1)]


def _token(split: SplitK, t: int, what: str) -> str:
    return f"{split.kernel}t{t}.{what}"


def _add(core: CoreStreams, split: SplitK, group: tuple[int, ...], t: int, u: str, out: int, offset: int,
         sticks: int, sender: int) -> Item:
    """On SFU ``u``, add the piece received from member ``sender`` (its position) into this core's piece,
    from ``offset``."""
    slot = _slot(split, group.index(core.core), sender) + offset * STICK_BYTES
    return core.add(u, {"op": "add", "a": out, "b": slot, "out": out, "sticks": sticks,
                        "wait": [_token(split, t, f"r{core.core}<{group[sender]}.{u}")]})


def _slot(split: SplitK, owner: int, sender: int) -> int:
    """Where in the owner's receive area (by positions in the group) the sender's piece lands."""
    return split.recv_lx + (sender - (sender > owner)) * split.piece_max * STICK_BYTES
