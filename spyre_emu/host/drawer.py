"""A program on several cards (``spyre-emu run --cards N``), and the host model's part of its timeline.

A multi-card program is one program run on every card of the drawer, as the identical shards of a
tensor-parallel step run: each card has its own host process (a rank) that launches it, and when
the program is a kernel program the cards then all-reduce its outputs (the sum a row-parallel shard
needs). The cards are identical, so the program is simulated once. This is a first call: each rank
builds its launch (deserialize and prepare, configs/host.toml).
"""

from __future__ import annotations

import json
import math
from typing import Any

from ..config import Machine
from ..config.machine import DTYPE_BYTES
from ..pipeline import Program
from .config import Host
from .runtime import Collective, Launch, Timeline, simulate_ranks

HOST_PID, DRAWER_PID, CARD_PID = 200, 201, 210  # after the card's own processes (results/timeline.py)


def output_bytes(program: Program) -> int:
    """The bytes a kernel program's outputs hold on one card (0 for a unit program: it names none)."""
    return sum(math.prod(t.layout.shape) * DTYPE_BYTES[t.layout.dtype] for t in program.tensors.values()
               if t.role == "output")


def run_on_cards(program: Program, name: str, card_us: float, cards: int, host: Host, machine: Machine
                 ) -> tuple[dict[str, Any], Timeline]:
    """The drawer's figures for ``program`` (``card_us`` on one card) on ``cards`` cards, and its timeline."""
    nbytes = output_bytes(program)
    ranks = [[Launch(name, card_us, card=r)] + ([Collective("all_reduce", nbytes, tuple(range(cards)))]
                                                if nbytes and cards > 1 else []) for r in range(cards)]
    t = simulate_ranks(ranks, host, machine, warm=False)
    threads = ["host"] if cards == 1 else [f"host.rank{r}" for r in range(cards)]
    return {"cards": cards, "host_us": round(t.end_us, 3), "card_us": round(card_us, 3),
            "launch_us": [round(t.busy_us(w), 3) for w in threads],
            "dispatch_us": machine.launch_us(),
            "card_busy_us": [round(t.busy_us(f"card{r}.compute"), 3) for r in range(cards)],
            "all_reduce_bytes": nbytes if cards > 1 else 0, "collective_us": round(t.busy_us("drawer"), 3)}, t


def text(drawer: dict[str, Any]) -> str:
    return (f"drawer: {drawer['cards']} cards, {drawer['host_us']:.3f} us from the first launch call to the "
            f"host seeing the end; per rank {drawer['launch_us'][0]:.3f} us building the launch, "
            f"{drawer['dispatch_us']:.3f} us dispatch; card busy "
            f"{', '.join(f'{u:.3f}' for u in drawer['card_busy_us'])} us; all-reduce of "
            f"{drawer['all_reduce_bytes']} B {drawer['collective_us']:.3f} us\n")


def trace_events(t: Timeline, cards: int) -> list[dict[str, Any]]:
    """Chrome trace events: a "host" process (a track per rank), a "drawer" process (collectives), a
    process per card (compute, DMA in, DMA out); flows from each launch's build to its kernel and from
    each card's last kernel before a collective to it."""
    events = [_meta(HOST_PID, "process_name", "host (runtime model)"), _meta(DRAWER_PID, "process_name", "drawer")]
    events += [_meta(CARD_PID + c, "process_name", f"card {c}") for c in range(cards)]
    tracks: dict[str, tuple[int, int]] = {"drawer": (DRAWER_PID, 0)}
    for r in range(cards):
        tracks["host" if cards == 1 else f"host.rank{r}"] = (HOST_PID, r)
        for tid, unit in enumerate(("compute", "dma_h2d", "dma_d2h")):
            tracks[f"card{r}.{unit}"] = (CARD_PID + r, tid)
    for where, (pid, tid) in tracks.items():
        events.append(_meta(pid, "thread_name", where, tid))
    flows = 0
    last_kernel: dict[int, Any] = {}
    for s in sorted(t.spans, key=lambda s: (s.start, s.where)):
        pid, tid = tracks[s.where]
        events.append({"ph": "X", "cat": "host", "name": s.what, "pid": pid, "tid": tid, "ts": _us(s.start),
                       "dur": _us(s.end - s.start), "args": {"op": s.index}})
        if s.where.endswith(".compute"):
            last_kernel[pid - CARD_PID] = s
            build = next((b for b in t.spans if b.where.startswith("host") and b.what == f"build {s.what}"
                          and b.end <= s.start and tracks[b.where][1] == pid - CARD_PID), None)
            if build is not None:
                flows += 1
                events += _flow(flows, "launch", tracks[build.where], build.end, (pid, tid), s.start)
        elif s.where == "drawer":
            for card, k in sorted(last_kernel.items()):
                flows += 1
                events += _flow(flows, "collective", tracks[f"card{card}.compute"], k.end, (pid, tid), s.start)
    return events


def trace_json(t: Timeline, cards: int) -> str:
    """The host model's timeline alone, as a Chrome trace (the front end's ``<trace>.drawer.json``)."""
    return json.dumps({"traceEvents": trace_events(t, cards), "displayTimeUnit": "ns"}) + "\n"


def _us(x: float) -> float:
    return round(x, 4)


def _meta(pid: int, name: str, value: Any, tid: int = 0) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": {"name": value}}


def _flow(i: int, cat: str, src: tuple[int, int], start: float, dst: tuple[int, int], end: float) -> list[dict]:
    return [{"ph": "s", "id": i, "cat": cat, "name": cat, "pid": src[0], "tid": src[1], "ts": _us(start)},
            {"ph": "f", "bp": "e", "id": i, "cat": cat, "name": cat, "pid": dst[0], "tid": dst[1], "ts": _us(end)}]
