"""The front end's graph: values and nodes between the ATen graph and the kernel program.

A ``Value`` is one tensor of the model. A value that lives on the card sits in a device tensor
(a tensor of the kernel program) whose host shape, ``dshape``, groups the value's leading dims:
(rows, last) for most values, (batch, rows, last) around batched matmuls. Grouping keeps the
row-major element order, so a view that only regroups leading dims is the same device tensor
(``storage`` names the value that owns it); any other view moves data.

A ``Node`` is either a kernel (a SuperDSC op the card runs) or a host step (torch on the CPU:
a view that moves data, or an op the card does not run). Nodes are kept in program order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

DEVICE_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16"}


@dataclass(eq=False)
class Value:
    """One tensor; ``const`` holds the data of a constant folded at compile time (a scalar operand)."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    storage: Value | None = None            # the value whose device tensor this one views
    dshape: tuple[int, ...] | None = None   # the device tensor's shape, once it has one
    const: torch.Tensor | None = None
    carrier: torch.dtype | None = None      # the device dtype of a bool value (comparisons give 1.0 / 0.0)
    from_device: bool = False               # computed from kernel results (crossing to the host costs)

    @property
    def root(self) -> Value:
        return self.storage.root if self.storage is not None else self


@dataclass(eq=False)
class Node:
    """A kernel (``op`` is a SuperDSC op) or a host step (``host`` says why it runs on the CPU).

    ``fx`` is the ATen node it came from: host steps execute it; errors quote its source line.
    ``dims`` and ``slices`` are the kernel's iteration space and work division.
    """

    op: str
    inputs: list[Value]
    outputs: list[Value]
    fx: torch.fx.Node | None
    attrs: dict[str, Any] = field(default_factory=dict)
    host: str | None = None        # None: a kernel; "view" or "fallback"
    reason: str = ""               # why a host step is not a kernel
    dims: dict[str, int] = field(default_factory=dict)
    slices: dict[str, int] = field(default_factory=dict)
    name: str = ""
    tensors: list[str] = field(default_factory=list)   # device tensors of the inputs, then the output
    unfused: list[Node] = field(default_factory=list)  # a fused kernel's chain of primitives, in order

    @property
    def is_kernel(self) -> bool:
        return self.host is None


@dataclass(eq=False)
class DeviceTensor:
    """A tensor of the kernel program: a kernel's result, or a host value copied in (``upload``).

    ``expand`` is the torch shape a host value is broadcast to before it is copied in, when the
    kernel cannot broadcast it.
    """

    name: str
    value: Value
    dshape: tuple[int, ...]
    dtype: str
    upload: bool
    expand: tuple[int, ...] | None = None
    space: str = "dram"          # "dram" or "lx", set by the scratchpad pass


@dataclass
class Graph:
    """Inputs in call order, nodes in program order, and the outputs' structure (values in a list)."""

    inputs: list[Value]
    nodes: list[Node]
    outputs: list[Value | None]
    tensors: dict[str, DeviceTensor] = field(default_factory=dict)


def rows_shape(shape: tuple[int, ...], kept: int = 1) -> tuple[int, ...]:
    """``shape`` with all but the last ``kept`` dims merged into one leading dim."""
    shape = (1,) * max(0, kept - len(shape)) + tuple(shape)
    return (math.prod(shape[:len(shape) - kept]), *shape[len(shape) - kept:])


def is_grouping(shape: tuple[int, ...], dshape: tuple[int, ...]) -> bool:
    """Whether ``dshape`` is ``shape`` with its leading dims merged (same bytes on the card)."""
    return rows_shape(shape, len(dshape) - 1) == tuple(dshape)


def source_line(fx: torch.fx.Node | None) -> str:
    """The user's source line an ATen node came from, for error messages and the report."""
    if fx is None:
        return "<generated>"
    trace = fx.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    return lines[-1] if lines else f"<aten node {fx.name}>"
