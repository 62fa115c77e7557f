"""The passes in order, top to bottom: ATen graph -> kernel programs and host steps.

1. ``build_graph`` (aten_to_kernels.py): ATen ops -> kernels, view steps, fallbacks
2. ``fuse`` (fusion.py): composite ops back into one kernel (softmax, norms, SiLU, GELU)
3. ``assign_layouts`` (layout.py): device tensors, views restickified on the card, host round trips
   ``tile_queries`` (query_tiles.py): attention whose scores do not fit in LX as tiles of query rows, and 3 again
4. ``divide_work`` (work_division.py): each kernel's split over the cores
5. ``split_steps`` (program.py): kernel programs between host steps
6. ``plan_scratchpad`` (scratchpad.py): intermediates in LX when they fit
   ``split_launches`` (program.py): segments cut where no LX-resident value crosses
   ``emit_programs`` (program.py): each launch's kernel program
7. lowering: a kernel the simulator's lowering refuses becomes a CPU fallback (a refused
   restickify: a host round trip; a refused matmul with LX operands: those in DRAM), and 3-7 run again
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from spyre_emu import pipeline
from spyre_emu.config import Machine
from spyre_emu.errors import ProgramError, SpyreEmuError
from spyre_emu.kernel_program import parse_kernel_program
from spyre_emu.kernel_program.ops import OPS
from spyre_emu.pipeline import Program

from .aten_to_kernels import build_graph
from .fusion import fuse
from .graph import Graph, Node, Value, source_line
from .layout import assign_layouts, crossings
from .options import Options
from .program import Segment, Step, emit_programs, split_launches, split_steps
from .progress import bar
from .query_tiles import tile_queries
from .scratchpad import plan_scratchpad
from .work_division import divide_work


@dataclass
class Compiled:
    """What a call runs: the graph, its steps in order, and each segment's lowered program."""

    graph: Graph
    steps: list[Step]
    programs: list[Program | None]      # per step: the lowered program of a segment, None for a host step
    crossings: list[tuple[str, str, int]]
    transfers: list[tuple[str, str, int, int, str]] = field(default_factory=list)  # the step's ends (transfers.py)


def compile_graph(gm: torch.fx.GraphModule, options: Options, machine: Machine,
                  parameters: Sequence[bool] = ()) -> Compiled:
    """``parameters``: for each input of ``gm``, whether it is a module's parameter (with
    ``options.weights == "stored"``, the card holds it in its own layout: layout.py)."""
    graph = build_graph(gm)
    if options.weights == "stored":
        graph.stored = {v for v, p in zip(graph.inputs, parameters, strict=True) if p and isinstance(v, Value)}
    fuse(graph)
    nodes = list(graph.nodes)
    for i, node in enumerate(nodes):
        _name(node, f"{i}")
    cores = options.cores or machine.cores.count
    lowered: dict[str, tuple[dict, Program]] = {}  # kernel program JSON -> it and its lowering, across retries
    host_views: set[Value] = set()    # views whose restickify the lowering refused
    dram: set[str] = set()            # tensors a refused matmul held in LX: in DRAM from then on
    while True:
        graph.nodes = list(nodes)
        _mark_constants(graph)
        assign_layouts(graph, host_views)
        if tile_queries(graph, nodes, machine, cores):  # attention too large for LX: query tiles, laid out anew
            continue
        divide_work(graph, machine, cores)
        steps = split_steps(graph)
        plan_scratchpad(graph, steps, machine, frozenset(dram))
        steps = split_launches(graph, steps)
        emit_programs(graph, steps)
        programs = [_lower(step, machine, lowered, options.cache) if isinstance(step, Segment) else None
                    for step in bar(steps, "lowering kernel programs")]
        refused = next((p for p in programs if isinstance(p, tuple)), None)
        if refused is None:
            break
        node, message = refused
        held = [n for n in node.tensors if graph.tensors[n].space == "lx"]
        if node.op == "batchmatmul" and held:  # its LX operands go to DRAM, the matmul stays on the card
            dram.update(held)
        elif "view" in node.attrs:  # a restickify: the view goes through the host
            host_views.add(node.attrs["view"])
        elif node.unfused:  # run the chain it was fused from instead
            at = nodes.index(node)
            nodes[at:at + 1] = node.unfused
        else:
            node.host, node.reason = "fallback", f"the lowering refuses it: {message}"
    apply_policy(graph, options)
    return Compiled(graph, steps, programs, crossings(graph))


def _name(node: Node, index: str) -> None:
    """Stable names across retries; a fused kernel's chain is named after it (k5_0_exp, ...)."""
    node.name = f"k{index}_{node.op}" if node.is_kernel else f"h{index}"
    for j, part in enumerate(node.unfused):
        _name(part, f"{index}_{j}")


def _lower(seg: Segment, machine: Machine, lowered: dict[str, tuple[dict, Program]], cache: bool
           ) -> Program | tuple[Node, str]:
    """The segment's lowered program, or the first kernel the lowering refuses and why. Segments with
    the same kernel program (the launches of identical layers) are given one ``data`` dict: equal by
    value, it need not be held 40 times (the objects a full garbage collection walks, speed.md)."""
    for k in seg.kernels:
        if k.op not in OPS:
            return k, f"no op {k.op!r} in the kernel program op table"
    text = json.dumps(seg.data, sort_keys=True)
    if text not in lowered:
        try:
            program = pipeline.lowered(parse_kernel_program(seg.data, "<torch.compile>"), machine, cache=cache)
        except ProgramError as exc:
            found = re.match(r"kernels\[(\d+)\]", exc.path or "")
            if found is None:
                raise
            return seg.kernels[int(found.group(1))], exc.message
        lowered[text] = seg.data, program
    seg.data, program = lowered[text]
    return program


def _mark_constants(graph: Graph) -> None:
    """Kernels and host steps that read no graph input compute constants (masks, positions): they
    are folded on the host, neither kernels nor fallbacks."""
    varying = set(graph.inputs)
    for node in graph.nodes:
        if any(v in varying for v in node.inputs):
            varying.update(node.outputs)
        elif node.is_kernel or node.host == "fallback":
            node.host = "constant"


def apply_policy(graph: Graph, options: Options) -> None:
    """fallback="error" refuses the first fallback; otherwise one warning per compiled graph sums them
    up: each op with its count and its first reason (the report lists every one)."""
    fallbacks = [node for node in graph.nodes if node.host == "fallback"]
    if fallbacks and options.fallback == "error":
        node = fallbacks[0]
        raise SpyreEmuError(f"{node.op} has no kernel on the card ({node.reason}); it comes from "
                            f"{source_line(node.fx)}", None, "options.fallback")
    if fallbacks:
        counts = Counter(node.op for node in fallbacks)
        reasons = {node.op: node.reason for node in reversed(fallbacks)}
        ops = ", ".join(f"{op}×{n} ({reasons[op]})" for op, n in counts.items())
        warnings.warn(f"spyre_emu: {len(fallbacks)} op{'s' * (len(fallbacks) > 1)} on the CPU: {ops}; "
                      "see last_report().fallbacks",
                      stacklevel=2)
