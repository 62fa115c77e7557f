"""Passes 5 and 6: the annotated graph -> kernel programs, one per launch.

Host steps cut the program: the kernels between two host steps form one ``Segment``. A kernel
that reads a value of its own segment through the host (a view whose restickify the lowering
refuses, see layout.py) also starts a new segment, since the host copy happens in between.
Once the scratchpad is planned, each segment is cut again into launches (``split_launches``):
kernels that hand a value over in LX stay in one kernel program, kernels that hand over through
DRAM are launched one after another, each on a quiet card (docs/decisions/launches.md). A
launch's program names its tensors and kernels by position, so the launches of identical layers
are the same program: lowered once, simulated once.
A segment's tensors are inputs when they come from before it, outputs when anything after it
(a later segment, a host step, the caller) reads them, else intermediates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from spyre_emu.kernel_program import ops as op_table

from .graph import Graph, Node, Value


@dataclass
class Segment:
    """Kernels run as one kernel program; ``data`` is that program, ``inputs``/``outputs`` its tensor names."""

    kernels: list[Node]
    data: dict[str, Any] = field(default_factory=dict)
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # graph tensor or kernel name -> its name in ``data``


Step = Segment | Node


def split_steps(graph: Graph) -> list[Step]:
    """Host steps and segments of consecutive kernels, in program order; a folded constant (a causal mask), which
    reads nothing the card computes, goes before the segment being built instead of cutting it."""
    steps: list[Step] = []
    produced: set[Value] = set()
    for node in graph.nodes:
        if not node.is_kernel:
            hoist = node.host == "constant" and bool(steps) and isinstance(steps[-1], Segment)
            steps.insert(len(steps) - hoist, node)
            continue
        through_host = any(graph.tensors[n].upload and graph.tensors[n].value.root in produced
                           for n in node.tensors[:-1])
        if not steps or not isinstance(steps[-1], Segment) or through_host:
            steps.append(Segment([]))
            produced = set()
        steps[-1].kernels.append(node)
        produced.add(node.outputs[0])
    return steps


def split_launches(graph: Graph, steps: list[Step]) -> list[Step]:
    """Each segment cut wherever no LX-resident tensor is live across the kernel boundary."""
    out: list[Step] = []
    for step in steps:
        if not isinstance(step, Segment):
            out.append(step)
            continue
        last_use = {n: i for i, k in enumerate(step.kernels) for n in k.tensors if graph.tensors[n].space == "lx"}
        live_until = -1
        for i, k in enumerate(step.kernels):
            if i > live_until:
                out.append(Segment([]))
            out[-1].kernels.append(k)
            live_until = max([live_until, *(last_use[n] for n in k.tensors if n in last_use)])
    return out


def emit_programs(graph: Graph, steps: list[Step]) -> None:
    """Fill in each segment's kernel program, last to first, so that what later steps read is
    gathered in one pass."""
    later = {v.root.name for v in graph.outputs if isinstance(v, Value)}  # the caller needs them
    for step in reversed(steps):
        if isinstance(step, Segment):
            _emit(graph, step, later)
        later |= _reads(graph, step)


def _reads(graph: Graph, step: Step) -> set[str]:
    """Device tensors a step reads, or whose values it needs on the host."""
    if not isinstance(step, Segment):
        return {v.root.name for v in step.inputs}
    read = {n for k in step.kernels for n in k.tensors[:-1]}
    return read | {graph.tensors[n].value.root.name for n in read if graph.tensors[n].upload}


def _emit(graph: Graph, seg: Segment, later: set[str]) -> None:
    written = {k.tensors[-1] for k in seg.kernels}
    read = [n for k in seg.kernels for n in k.tensors[:-1]]
    seg.inputs = list(dict.fromkeys(n for n in read if n not in written))
    seg.outputs = [n for n in dict.fromkeys(written) if n in later]
    order = list(dict.fromkeys((*seg.inputs, *(k.tensors[-1] for k in seg.kernels))))
    seg.names = {name: f"t{i}" for i, name in enumerate(order)}
    seg.names.update({k.name: f"k{i}_{k.op}" for i, k in enumerate(seg.kernels)})
    tensors = {}
    for name in order:
        t = graph.tensors[name]
        role = "input" if name in seg.inputs else "output" if name in seg.outputs else "intermediate"
        spec = {"shape": list(t.dshape), "dtype": t.dtype, "role": role}
        if t.space != "dram" and role == "intermediate":
            spec["space"] = t.space
            if t.in_place_of is not None:
                spec["in_place_of"] = seg.names[t.in_place_of]
        tensors[seg.names[name]] = spec
    seg.data = {"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                "kernels": [_kernel(k, seg.names) for k in seg.kernels]}


def _kernel(k: Node, names: dict[str, str]) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": names[k.name], "op": k.op, "inputs": [names[n] for n in k.tensors[:-1]],
                            "outputs": [names[k.tensors[-1]]], "dims": k.dims,
                            "work_division": {d: n for d, n in k.slices.items() if n > 1}}
    attrs = {a: v for a, v in k.attrs.items() if a in getattr(op_table, "ATTRS", {}).get(k.op, {})}
    if attrs:
        spec["attrs"] = attrs
    return spec
