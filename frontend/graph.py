"""The front end's graph: values and nodes between the ATen graph and the kernel program.

A ``Value`` is one tensor of the model. A value computed on the card sits in a device tensor (a
tensor of the kernel program) whose host shape, ``dshape``, merges consecutive dims of the
value: (rows, last) for most values, (batch, rows, last) around batched matmuls. Merging keeps
the row-major element order. A view (a chain of permutes and reshapes) is not computed: it
names the value it views (``storage``) and the order of its elements (``order``, views.py);
the layout pass gives it a device tensor where a kernel reads it, restickifying on the card.

A ``Node`` is either a kernel (a SuperDSC op the card runs) or a host step (torch on the CPU: a
view no restickify expresses, such as a slice or a cat; an op the card does not run; a
constant folded at compile time). Nodes are kept in program order.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from spyre_emu.errors import SpyreEmuError

from .views import Order

DEVICE_DTYPES = {torch.float16: "fp16", torch.bfloat16: "bf16", torch.float32: "fp32"}
MATMUL_DTYPES = {torch.float16, torch.bfloat16}  # the PT array's; fp32 runs on the SFU only


@dataclass(eq=False)
class Value:
    """One tensor; ``const`` holds the data of a constant folded at compile time (a scalar operand)."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    storage: Value | None = None            # the value this one is a view of
    order: Order | None = None              # a view's elements as an order of its storage's (None: the same)
    dshape: tuple[int, ...] | None = None   # the shape of the device tensor a kernel computed it into
    const: torch.Tensor | None = None
    carrier: torch.dtype | None = None      # the device dtype of a bool value (comparisons give 1.0 / 0.0)
    # or of an integer one (top-k's indices, exact in fp32)
    from_device: bool = False               # computed from kernel results (crossing to the host costs)

    @property
    def root(self) -> Value:
        return self.storage.root if self.storage is not None else self

    @property
    def elements(self) -> Order:
        """Which of its root's elements the value lists, in row-major order."""
        return self.order or Order.of(self.root.shape)


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
    host: str | None = None        # None: a kernel; "view", "fallback", "constant" or "collective"
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
    """A tensor of the kernel program holding ``value`` in ``dshape``: a kernel's result (a
    restickify kernel's, for a view), or a host value copied in (``upload``), broadcast to the
    torch shape ``expand`` first when a kernel reads host data in a grouping it cannot broadcast."""

    name: str
    value: Value
    dshape: tuple[int, ...]
    dtype: str
    upload: bool
    expand: tuple[int, ...] | None = None
    space: str = "dram"          # "dram" or "lx", set by the scratchpad pass
    in_place_of: str | None = None  # an LX tensor it is written over (scratchpad pass)


@dataclass
class Graph:
    """Inputs in call order, nodes in program order, and the outputs' structure (values in a list)."""

    inputs: list[Value]
    nodes: list[Node]
    outputs: list[Value | None]
    tensors: dict[str, DeviceTensor] = field(default_factory=dict)
    held: dict[Value, list[DeviceTensor]] = field(default_factory=dict)  # tensors by their value's root, in order
    stored: set[Value] = field(default_factory=set)  # parameters the card holds in their own layout (options.weights)

    def add_tensor(self, t: DeviceTensor) -> None:
        self.tensors[t.name] = t
        self.held.setdefault(t.value.root, []).append(t)


def rows_shape(shape: tuple[int, ...], kept: int = 1) -> tuple[int, ...]:
    """``shape`` with all but the last ``kept`` dims merged into one leading dim."""
    shape = (1,) * max(0, kept - len(shape)) + tuple(shape)
    return (math.prod(shape[:len(shape) - kept]), *shape[len(shape) - kept:])


def source_line(fx: torch.fx.Node | None) -> str:
    """The user's source line an ATen node came from, for error messages and the report."""
    if fx is None:
        return "<generated>"
    trace = fx.meta.get("stack_trace") or ""
    lines = [ln.strip() for ln in trace.strip().splitlines() if ln.strip().startswith("File ")]
    return lines[-1] if lines else f"<aten node {fx.name}>"


def failure(fx: torch.fx.Node | None, shapes: list[Any], exc: Exception) -> SpyreEmuError:
    """An unexpected error while handling one ATen node, as one line: the node, its op, its operand
    shapes, what went wrong and the user's source line."""
    op = getattr(fx, "target", "?")
    what = " ".join(str(exc).split()) or type(exc).__name__
    return SpyreEmuError(f"node {getattr(fx, 'name', '?')}: {op} on operands of shape "
                         f"{', '.join(map(str, shapes)) or '()'} failed ({what}); it comes from {source_line(fx)}")


@contextlib.contextmanager
def blame(node: Node) -> Iterator[None]:
    """A pass's unexpected error on ``node`` as ``failure``'s one line (errors of ours pass through)."""
    try:
        yield
    except SpyreEmuError:
        raise
    except Exception as exc:
        raise failure(node.fx, [list(v.shape) for v in node.inputs], exc) from exc
