"""A compiled call on a drawer: its launches and collectives through the host model (spyre_emu.host).

Every card of a tensor-parallel call runs the same kernel programs (identical shards), so one card's
simulated times stand for all. Each card has its own host process (a rank) that copies its slices of
the step's inputs in (transfers.py), launches its programs in order, meets the others at each
collective, and copies its results out; PCIe round trips of host steps follow the rank's launches.
The step is a warm one: every program was built by an earlier step, so each launch only patches its
addresses (configs/host.toml), as in a serving loop.

``step_us`` prices a model's step on N cards (µs); ``drawer_step`` gives all the figures: timing-only,
each compiles and runs the model once.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import torch

from spyre_emu.config import Machine
from spyre_emu.host import Collective, Copy, Launch, load_host, simulate_ranks
from spyre_emu.pipeline import RunResult

from .collectives import nbytes
from .compile import Compiled
from .graph import Node
from .options import Options
from .program import Segment
from .report import capture


def program_key(segment: Segment) -> str:
    """A kernel program's name in the host model: its text's hash, so identical layers are one program."""
    return hashlib.sha256(json.dumps(segment.data, sort_keys=True).encode()).hexdigest()[:12]


def rank_ops(compiled: Compiled, runs: list[tuple[Segment, RunResult]], transfers: list[dict[str, Any]],
             split: set[int], card: int, cards: int) -> list[Any]:
    """What rank ``card`` issues: the step's inputs copied in, a launch per kernel program (named by its
    text, so identical layers are one program), a collective per collective step, then the round trips'
    copies and the step's results copied out (``split``: outputs each card holds a slice of; a
    replicated one comes back from rank 0)."""
    times = iter(r.report.data["latency_us"] for _, r in runs)
    ops: list[Any] = [Copy("h2d", t["bytes"], card=card) for t in transfers if t["direction"] == "h2d"]
    for step in compiled.steps:
        if isinstance(step, Segment):
            ops.append(Launch(program_key(step), next(times), card=card))
        elif isinstance(step, Node) and step.host == "collective":
            out = step.outputs[0]
            ops.append(Collective(step.op, nbytes(step.op, out.shape, out.dtype), tuple(range(cards))))
    ops += [Copy(d, b, card=card) for d, _, b in compiled.crossings]
    return ops + [Copy("d2h", t["bytes"], card=card) for t in transfers
                  if t["direction"] == "d2h" and (card == 0 or t["index"] in split)]


def figures(compiled: Compiled, runs: list[tuple[Segment, RunResult]], transfers: list[dict[str, Any]],
            split: set[int], cards: int, machine: Machine, options: Options) -> dict[str, Any]:
    """The drawer's step (µs): its end, one card's kernel time, per card its busy time and its host
    process's launch work, the collectives' time on the switch, the step's copies, and the host model's
    ``timeline``."""
    host = load_host(options.host)
    ranks = [rank_ops(compiled, runs, transfers, split, r, cards) for r in range(cards)]
    t = simulate_ranks(ranks, host, machine, warm=True)
    threads = ["host"] if cards == 1 else [f"host.rank{r}" for r in range(cards)]
    launches = sum(isinstance(op, Launch) for op in ranks[0])
    return {"cards": cards, "step_us": round(t.end_us, 3),
            "card_us": round(sum(op.card_us for op in ranks[0] if isinstance(op, Launch)), 3),
            "launches": launches, "dispatch_us": round(launches * machine.launch_us(), 3),
            "card_busy_us": [round(t.busy_us(f"card{r}.compute"), 3) for r in range(cards)],
            "host_busy_us": [round(t.busy_us(w), 3) for w in threads],
            "collectives": sum(isinstance(op, Collective) for op in ranks[0]),
            "collective_us": round(t.busy_us("drawer"), 3), "copies": [sum(isinstance(op, Copy) for op in ops)
                                                                    for ops in ranks], "timeline": t}


def drawer_step(model: torch.nn.Module, inputs: tuple[Any, ...], cards: int, **options: Any) -> dict[str, Any]:
    """One call of ``model`` on ``cards`` cards (tensor parallel), timing-only: the drawer's figures
    (``figures``). ``inputs`` may be meta tensors; ``options`` are the backend's."""
    compiled = torch.compile(model, backend="spyre_emu", dynamic=False,
                             options={**options, "cards": cards, "functional": False})
    with torch.no_grad(), capture() as reports:
        compiled(*inputs)
    return reports[-1].drawer


def step_us(model: torch.nn.Module, inputs: tuple[Any, ...], cards: int, **options: Any) -> float:
    """Simulated µs of one step of ``model`` on ``cards`` cards: ``drawer_step(...)["step_us"]``."""
    return drawer_step(model, inputs, cards, **options)["step_us"]
