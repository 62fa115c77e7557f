"""Pass 6: the annotated graph -> kernel programs, one per run of consecutive kernels.

Host steps cut the program: the kernels between two host steps form one kernel program
(a ``Segment``). A kernel that reads a value of its own segment through the host (a view whose
restickify the lowering refuses, see layout.py) also starts a new segment, since the host copy
happens in between.
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


Step = Segment | Node


def split_steps(graph: Graph) -> list[Step]:
    """Host steps and segments of consecutive kernels, in program order."""
    steps: list[Step] = []
    produced: set[Value] = set()
    for node in graph.nodes:
        if not node.is_kernel:
            steps.append(node)
            continue
        through_host = any(graph.tensors[n].upload and graph.tensors[n].value.root in produced
                           for n in node.tensors[:-1])
        if not steps or not isinstance(steps[-1], Segment) or through_host:
            steps.append(Segment([]))
            produced = set()
        steps[-1].kernels.append(node)
        produced.add(node.outputs[0])
    return steps


def emit_programs(graph: Graph, steps: list[Step]) -> None:
    """Fill in each segment's kernel program."""
    for i, step in enumerate(steps):
        if isinstance(step, Segment):
            _emit(graph, step, _read_after(graph, steps[i + 1:]))


def _read_after(graph: Graph, steps: list[Step]) -> set[str]:
    """Device tensors read by later segments, or whose values the host or the caller needs."""
    out: set[str] = set()
    for step in steps:
        if isinstance(step, Segment):
            out |= {n for k in step.kernels for n in k.tensors[:-1]}
            out |= {graph.tensors[n].value.root.name for k in step.kernels for n in k.tensors[:-1]
                    if graph.tensors[n].upload}
        else:
            out |= {v.root.name for v in step.inputs}
    out |= {v.root.name for v in graph.outputs if isinstance(v, Value)}
    return out


def _emit(graph: Graph, seg: Segment, later: set[str]) -> None:
    written = {k.tensors[-1] for k in seg.kernels}
    read = [n for k in seg.kernels for n in k.tensors[:-1]]
    seg.inputs = list(dict.fromkeys(n for n in read if n not in written))
    seg.outputs = [n for n in dict.fromkeys(written) if n in later]
    tensors = {}
    for name in (*seg.inputs, *dict.fromkeys(k.tensors[-1] for k in seg.kernels)):
        t = graph.tensors[name]
        role = "input" if name in seg.inputs else "output" if name in seg.outputs else "intermediate"
        spec = {"shape": list(t.dshape), "dtype": t.dtype, "role": role}
        if t.space != "dram" and role == "intermediate":
            spec["space"] = t.space
        tensors[name] = spec
    seg.data = {"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                "kernels": [_kernel(k) for k in seg.kernels]}


def _kernel(k: Node) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": k.name, "op": k.op, "inputs": k.tensors[:-1], "outputs": k.tensors[-1:],
                            "dims": k.dims, "work_division": {d: n for d, n in k.slices.items() if n > 1}}
    attrs = {a: v for a, v in k.attrs.items() if a in getattr(op_table, "ATTRS", {}).get(k.op, {})}
    if attrs:
        spec["attrs"] = attrs
    return spec
