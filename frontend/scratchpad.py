"""Pass 5: intermediates stay in the scratchpad (LX) when they fit, else go to DRAM.

A tensor can live in LX only while one kernel program runs, and only where every kernel that
touches it gives each core the same slice of it (then each core finds its own sticks in its
own LX): here, kernels whose iteration space is the tensor's shape, split the same way, in the
families the lowering streams through LX (no matmul). Candidates are taken in program order
while the residents live at the same time fit in half the usable LX per core; the other half
stays for the kernels' double-buffered chunks. The rest stays in DRAM.
"""

from __future__ import annotations

import math

from spyre_emu.config import Machine

from .graph import DeviceTensor, Graph, Node
from .program import Segment, Step

LX_RESERVED_BYTES = 65536   # torch-spyre keeps 64 KB + 20 % of LX for the runtime (as the lowering does)
LX_RESERVED_SHARE = 0.2
STICK_BYTES = 128


def plan_scratchpad(graph: Graph, steps: list[Step], machine: Machine) -> None:
    """Mark the device tensors that stay in LX (``space = "lx"``)."""
    usable = (machine.lx.size_bytes - LX_RESERVED_BYTES) * (1 - LX_RESERVED_SHARE) // STICK_BYTES
    for seg in (s for s in steps if isinstance(s, Segment)):
        _plan_segment(graph, seg, int(usable) // 2, _read_elsewhere(steps, seg))


def _read_elsewhere(steps: list[Step], seg: Segment) -> set[str]:
    """Tensors another step reads: they must reach DRAM."""
    out: set[str] = set()
    for step in steps:
        if step is seg:
            continue
        if isinstance(step, Segment):
            out |= {n for k in step.kernels for n in k.tensors}
        else:
            out |= {v.root.name for v in step.inputs}
    return out


def _plan_segment(graph: Graph, seg: Segment, budget: int, elsewhere: set[str]) -> None:
    touching: dict[str, list[int]] = {}
    for i, k in enumerate(seg.kernels):
        for name in k.tensors:
            touching.setdefault(name, []).append(i)
    outputs = {v.root.name for v in graph.outputs if v is not None}
    live: list[tuple[int, int, int]] = []  # (first kernel, last kernel, sticks per core)
    for name, uses in touching.items():
        t = graph.tensors[name]
        if t.upload or name in elsewhere or name in outputs or len(uses) < 2:
            continue
        kernels = [seg.kernels[i] for i in uses]
        if not _same_slices(t, kernels):
            continue
        sticks = _sticks_per_core(t, kernels[0])
        overlap = sum(s for a, b, s in live if a <= uses[-1] and uses[0] <= b)
        if overlap + sticks <= budget:
            t.space = "lx"
            live.append((uses[0], uses[-1], sticks))


def _same_slices(t: DeviceTensor, kernels: list[Node]) -> bool:
    first = kernels[0]
    return all(k.op != "batchmatmul" and list(k.dims.values()) == list(t.dshape) and k.slices == first.slices
               for k in kernels)


def _sticks_per_core(t: DeviceTensor, kernel: Node) -> int:
    sticks = math.prod(t.dshape[:-1]) * -(-t.dshape[-1] // 64)
    return -(-sticks // math.prod(kernel.slices.values()))
