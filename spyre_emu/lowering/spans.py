"""The 256 MB rule: no core may address more than 256 MB of one DRAM tensor within a kernel.

``check_span`` decides it, in two places with the same message. Before lowering, ``check_boxes`` takes the spans
a division decides (``box_span``: a core whose DMAs cover exactly its piece of a tensor, matmul.py), so a
division the rule refuses is refused without building per-stick instructions for hundreds of megabytes first.
During lowering, ``lowered_spans`` measures each core's instructions as soon as it is lowered (the last word
on every kernel and family)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import TensorLayout, device_bytes, dim_map, host_strides
from ..unit_program.model import dram_span

MAX_SPAN_BYTES = 256 << 20  # a core may address at most 256 MB of one tensor (torch-spyre, high)
Span = tuple[int, int]      # first DRAM byte of a tensor a core addresses, and the byte after its last
Box = Sequence[tuple[int, int]]  # a [first, end) range of host indices per host dim


def check_span(core: int, name: str, span: Span, source: str, path: str) -> None:
    """Refuse core ``core`` addressing ``span`` of tensor ``name``, if it exceeds MAX_SPAN_BYTES."""
    lo, hi = span
    if hi - lo > MAX_SPAN_BYTES:
        raise ProgramError(f"core {core} would span {hi - lo} B of tensor {name!r}; at most {MAX_SPAN_BYTES} B "
                           "per core: split the work over more cores", source, path)


def lowered_spans(units: dict[str, list[dict]]) -> dict[str, Span]:
    """Per tensor, in order of first use (loads before stores), the span one core's DMA instructions address."""
    spans: dict[str, Span] = {}
    for unit in ("load", "store"):
        for item in units.get(unit, []):
            name, _, offset = item["dram"].partition("+")
            lo = int(offset)
            hi = lo + dram_span(item)
            span = spans.get(name)
            spans[name] = (lo, hi) if span is None else (min(span[0], lo), max(span[1], hi))
    return spans


def box_span(layout: TensorLayout, box: Box) -> Span:
    """The span of the device sticks holding the host indices of ``box`` (no range empty). A stick's index is a
    sum of one term per host dim (placement.stick_of), so its least and greatest over the box are the sums of
    each dim's least and greatest term over its range: exact for every layout."""
    owners, strides = dim_map(layout)[:-1], layout.stride_map[:-1]
    sizes, hstride = layout.device_size[:-1], host_strides(layout.shape)
    weights = [int(np.prod(sizes[j + 1:])) for j in range(len(sizes))]
    lo = hi = 0
    for d, (first, end) in enumerate(box):
        mine = [j for j in range(len(owners)) if owners[j] == d]
        if len(mine) == 1:  # one device dim: its least and greatest term without listing the range
            (j,) = mine
            per = strides[j] // hstride[d]
            least, most = _mod_range(first // per, (end - 1) // per, sizes[j])
            lo, hi = lo + least * weights[j], hi + most * weights[j]
        elif mine:
            host = np.arange(first, end, dtype=np.int64)
            term = sum(((host // (strides[j] // hstride[d])) % sizes[j]) * weights[j] for j in mine)
            lo, hi = lo + int(term.min()), hi + int(term.max())
    return lo * STICK_BYTES, (hi + 1) * STICK_BYTES


def _mod_range(first: int, last: int, size: int) -> tuple[int, int]:
    """The least and greatest of x % size over the consecutive integers first..last."""
    if last - first + 1 >= size or first % size > last % size:  # a whole period, or a wrap past size - 1 to 0
        return 0, size - 1
    return first % size, last % size


def check_boxes(cores: list[tuple[int, list[tuple[str, TensorLayout, Box | None]]]], source: str, path: str) -> None:
    """check_span before lowering, with the message the lowered check would give: per core in core order, its
    DRAM tensors in the order its DMAs first address them, each with the host box those DMAs cover exactly, or
    None where the division alone does not tell (a share of a cohort's operand, a split-K piece). It stops at
    the first undecided tensor large enough to break the rule: the lowered check decides from there on."""
    for core, tensors in cores:
        for name, layout, box in tensors:
            if box is None and device_bytes(layout) > MAX_SPAN_BYTES:
                return
            if box is not None:
                check_span(core, name, box_span(layout, box), source, path)
