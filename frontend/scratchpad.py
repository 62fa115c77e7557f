"""Pass 5: intermediates stay in the scratchpad (LX) when they fit, else go to DRAM.

A tensor can live in LX only while one kernel program runs, and only where every kernel that
touches it gives each core the same slice of it (then each core finds its own sticks in its
own LX): here, kernels whose iteration space is the tensor's shape, split the same way, in the
families the lowering streams through LX (pointwise, reductions, row-wise), and matmuls that
write it as C or read it as A with K unsplit, their batches and rows split as the others split
the tensor's (an A's columns, K, whole on a core, so the matmul's columns are unsplit too; never
B, never a restickify; work_division.py aligns attention's chains so). Candidates are taken in
program order while, at every kernel, the residents live at the same time leave the kernel its
own room: half the usable LX per core for its double-buffered chunks, or what a matmul needs for
its C tile and two K chunks. The rest stays in DRAM. A pointwise or row-wise kernel whose LX input of the
same layout it reads last (and, per the lowering's rule, stick by stick before writing it: lowering/lx.py)
writes its LX output over that input (``in_place_of``): the two take one place, counted once.
"""

from __future__ import annotations

import math

from spyre_emu.config import Machine
from spyre_emu.kernel_program import elems_per_stick
from spyre_emu.kernel_program.ops import OPS
from spyre_emu.lowering import usable_lx_sticks
from spyre_emu.lowering.lx import reads_before_writing

from .graph import DeviceTensor, Graph, Node
from .program import Segment, Step
from .work_division import matmul_lx_sticks

LX_FAMILIES = ("pointwise", "reduction", "rowwise")


def plan_scratchpad(graph: Graph, steps: list[Step], machine: Machine, dram: frozenset[str] = frozenset()) -> None:
    """Mark the device tensors that stay in LX (``space = "lx"``); ``dram``: tensors kept in DRAM whatever
    this rule says (a matmul's LX operand the lowering refused: compile.py)."""
    usable = usable_lx_sticks(machine)
    for seg in (s for s in steps if isinstance(s, Segment)):
        _plan_segment(graph, seg, [usable - _room(k, usable) for k in seg.kernels],
                      _read_elsewhere(graph, steps, seg) | dram)


def _room(kernel: Node, usable: int) -> int:
    """LX sticks per core a kernel keeps for itself."""
    if kernel.op == "batchmatmul":
        return matmul_lx_sticks(kernel.dims["mb"] // kernel.slices["mb"], kernel.dims["in"])
    return usable // 2


def _read_elsewhere(graph: Graph, steps: list[Step], seg: Segment) -> set[str]:
    """Tensors another step reads, or whose values the host prepares another step's input from (an upload of a
    computed value): they must reach DRAM."""
    out: set[str] = set()
    for step in steps:
        if step is seg:
            continue
        if isinstance(step, Segment):
            names = {n for k in step.kernels for n in k.tensors}
            out |= names | {graph.tensors[n].value.root.name for n in names if graph.tensors[n].upload}
        else:
            out |= {v.root.name for v in step.inputs}
    return out


def _plan_segment(graph: Graph, seg: Segment, budgets: list[int], elsewhere: set[str]) -> None:
    """``budgets``: per kernel, the LX sticks per core residents may hold while it runs."""
    touching: dict[str, list[int]] = {}
    for i, k in enumerate(seg.kernels):
        for name in k.tensors:
            touching.setdefault(name, []).append(i)
    outputs = {v.root.name for v in graph.outputs if v is not None}
    live = [0] * len(seg.kernels)  # resident sticks per core while each kernel runs
    for name, uses in touching.items():
        t = graph.tensors[name]
        if t.upload or name in elsewhere or name in outputs or len(uses) < 2:
            continue
        kernels = [seg.kernels[i] for i in uses]
        if not _same_slices(t, kernels):
            continue
        sticks = _sticks_per_core(t, kernels[0])
        over = _overwritten(graph, seg.kernels[uses[0]], t, touching, uses[0])
        span = range(uses[0] + (over is not None), uses[-1] + 1)  # in place: the input's sticks hold it there
        if all(live[i] + sticks <= budgets[i] for i in span):
            t.space, t.in_place_of = "lx", over
            for i in span:
                live[i] += sticks


def _overwritten(graph: Graph, kernel: Node, t: DeviceTensor, touching: dict[str, list[int]], at: int) -> str | None:
    """The LX input ``kernel`` (the ``at``-th of the segment, writing ``t``) may write ``t`` over: one of ``t``'s
    shape and dtype that no later kernel reads and whose every stick the kernel reads before writing it."""
    if kernel.tensors[-1] != t.name:
        return None
    inputs = tuple(kernel.tensors[:-1])
    return next((n for n in dict.fromkeys(inputs) if graph.tensors[n].space == "lx" and touching[n][-1] == at
                 and (graph.tensors[n].dshape, graph.tensors[n].dtype) == (t.dshape, t.dtype)
                 and reads_before_writing(kernel.op, inputs, n)), None)


def _same_slices(t: DeviceTensor, kernels: list[Node]) -> bool:
    cuts = [_cuts(t, k) for k in kernels]
    return cuts[0] is not None and all(c == cuts[0] for c in cuts)


def _cuts(t: DeviceTensor, kernel: Node) -> tuple[int, ...] | None:
    """How ``kernel`` cuts ``t`` over the cores (slices per dim of ``t``, in the order cores take them), or
    None where the lowering cannot keep ``t`` in LX for it."""
    if OPS[kernel.op].family in LX_FAMILIES:
        return tuple(kernel.slices.values()) if list(kernel.dims.values()) == list(t.dshape) else None
    if kernel.op != "batchmatmul" or kernel.slices["in"] > 1:
        return None
    lead = (kernel.slices["x"],) if "x" in kernel.slices else ()
    if t.name == kernel.tensors[-1] and t.name not in kernel.tensors[:-1]:  # C: [x,] mb, out
        return (*lead, kernel.slices["mb"], kernel.slices["out"])
    if t.name == kernel.tensors[0] != kernel.tensors[1] and kernel.slices["out"] == 1:  # A: [x,] mb, K whole
        return (*lead, kernel.slices["mb"], 1)
    return None


def _sticks_per_core(t: DeviceTensor, kernel: Node) -> int:
    sticks = math.prod(t.dshape[:-1]) * -(-t.dshape[-1] // elems_per_stick(t.dtype))
    return -(-sticks // math.prod(kernel.slices.values()))
