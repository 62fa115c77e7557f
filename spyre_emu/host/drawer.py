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
from ..results.chrome import track_id
from .config import Host
from .runtime import Collective, Launch, Span, Timeline, simulate_ranks

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


def trace_events(t: Timeline, cards: int, details: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Chrome trace events: a "host" process (a track per rank), a "drawer" process (collectives), a
    process per card (compute, DMA in, DMA out); flows from each launch's build to its kernel and from
    each card's last kernel before a collective to it. ``details``: a program's cycle-level trace file,
    named in its kernels' args. Perfetto's importer names threads by tid alone, so every track's tid is
    unique in the file (``track_id``); a flow's ends sit strictly inside their slices, where
    it binds them ("s" to the open slice, "f" with ``bp: e`` to the enclosing one)."""
    events = [_meta(HOST_PID, "process_name", "host (runtime model)"), _meta(DRAWER_PID, "process_name", "drawer")]
    events += [_meta(CARD_PID + c, "process_name", f"card {c}") for c in range(cards)]
    tracks: dict[str, tuple[int, int]] = {"drawer": (DRAWER_PID, track_id(DRAWER_PID, 0))}
    for r in range(cards):
        tracks["host" if cards == 1 else f"host.rank{r}"] = (HOST_PID, track_id(HOST_PID, r))
        for k, unit in enumerate(("compute", "dma_h2d", "dma_d2h")):
            tracks[f"card{r}.{unit}"] = (CARD_PID + r, track_id(CARD_PID + r, k))
    events += [_meta(pid, "thread_name", where, tid) for where, (pid, tid) in tracks.items()]
    builds = {(tracks[s.where], s.index): s for s in t.spans if s.where.startswith("host")}
    flows = 0
    last_kernel: dict[int, Any] = {}
    for s in sorted(t.spans, key=lambda s: (s.start, s.where)):
        pid, tid = tracks[s.where]
        args: dict[str, Any] = {"op": s.index}
        if details and s.what in details and s.where.endswith(".compute"):
            args["trace"] = details[s.what]
        events.append({"ph": "X", "cat": "host", "name": s.what, "pid": pid, "tid": tid, "ts": _us(s.start),
                       "dur": _us(_us(s.end) - _us(s.start)), "args": args})  # ends where the next starts
        if s.where.endswith(".compute"):
            card = pid - CARD_PID
            last_kernel[card] = s
            build = builds.get((tracks["host" if cards == 1 else f"host.rank{card}"], s.index))
            if build is not None:
                flows += 1
                events += _flow(flows, "launch", tracks[build.where], build, (pid, tid), s)
        elif s.where == "drawer":
            for card, k in sorted(last_kernel.items()):
                flows += 1
                events += _flow(flows, "collective", tracks[f"card{card}.compute"], k, (pid, tid), s)
    return events


def trace_json(t: Timeline, cards: int, details: dict[str, str] | None = None) -> str:
    """The host model's timeline alone, as a Chrome trace (the front end's step timeline with ``cards``)."""
    return json.dumps({"traceEvents": trace_events(t, cards, details), "displayTimeUnit": "ns"}) + "\n"


def _us(x: float) -> float:
    return round(x, 4)


def _meta(pid: int, name: str, value: Any, tid: int = 0) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": tid, "ts": 0, "args": {"name": value}}


def _flow(i: int, cat: str, src: tuple[int, int], out_of: Span, dst: tuple[int, int], into: Span) -> list[dict]:
    """An arrow from near the end of ``out_of`` to near the start of ``into``: 1 ns inside each (or its
    middle, if shorter), so the importer binds each end to its slice."""
    def inside(s: Span, at_end: bool) -> float:
        step = min(0.001, (s.end - s.start) / 2)
        return _us(s.end - step if at_end else s.start + step)
    return [{"ph": "s", "id": i, "cat": cat, "name": cat, "pid": src[0], "tid": src[1], "ts": inside(out_of, True)},
            {"ph": "f", "bp": "e", "id": i, "cat": cat, "name": cat, "pid": dst[0], "tid": dst[1],
             "ts": inside(into, False)}]
