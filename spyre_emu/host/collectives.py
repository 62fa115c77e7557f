"""Collectives between the cards of a drawer as spyreccl does them: synchronous, through host memory.

A card never writes another card's memory: each step, every member copies its piece out to a host
buffer (device to host), signals, and the next member copies it in (host to device) once it has
waited for the signal. All cards' copies of a step cross the switch's one uplink to the host, so a
step moves all of its pieces out, then all of them in, at the uplink's rate, after one signal/wait
round (``step_latency_us``). All-reduce (SUM) is a ring reduce-scatter then a ring all-gather:
2 (N - 1) steps of S / N bytes per member for S bytes per card. The sums themselves (on the cards'
SFUs, S / N bytes a step) are not timed: at the SFU's rate they are two orders of magnitude faster
than the PCIe copies. A collective also pays ``collective_fixed_us`` of host work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import ConfigError
from .config import Drawer

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "send_recv")


@dataclass(frozen=True)
class Plan:
    """A collective as steps: each step ``senders`` members copy ``out_bytes`` each out to host memory,
    then ``receivers`` members copy ``in_bytes`` each in."""

    steps: int
    senders: int
    out_bytes: int
    receivers: int
    in_bytes: int


def plan(kind: str, cards: int, nbytes: int) -> Plan:
    """The steps of a collective over ``cards`` members of ``nbytes`` each (1 card: nothing moves)."""
    n, piece = cards, -(-nbytes // cards)
    if n < 2:
        return Plan(0, 0, 0, 0, 0)
    if kind in ("all_reduce", "reduce_scatter", "all_gather"):
        return Plan((2 if kind == "all_reduce" else 1) * (n - 1), n, piece, n, piece)
    if kind == "broadcast":  # the root copies out once; every other member copies the whole in
        return Plan(1, 1, nbytes, n - 1, nbytes)
    if kind == "send_recv":
        return Plan(1, 1, nbytes, 1, nbytes)
    raise ConfigError(f"unknown collective {kind!r}; expected one of {', '.join(KINDS)}", None, "kind")


def collective_us(kind: str, nbytes: int, cards: int, drawer: Drawer, link_us: Callable[[int], float]) -> float:
    """Fixed host work, then each step's signal round and its copies out and in. ``link_us(bytes)`` is
    one card's PCIe transfer; a step's copies in one direction take that or the shared uplink's time
    for all of them, whichever is longer."""
    p = plan(kind, cards, nbytes)
    if not p.steps:
        return drawer.collective_fixed_us
    per_byte = 1e-3 / drawer.uplink_gbytes_per_s

    def leg(members: int, each: int) -> float:
        return max(link_us(each), members * each * per_byte)
    step = drawer.step_latency_us + leg(p.senders, p.out_bytes) + leg(p.receivers, p.in_bytes)
    return drawer.collective_fixed_us + p.steps * step
