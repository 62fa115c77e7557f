"""The graph builder of pass 1: values, kernels and host steps appended in program order.

The op handlers (aten_to_kernels.py for compute, view_ops.py for the view family) call these:
a kernel over torch shapes, a Python scalar as a constant, a reshape the front end adds, a cast,
or the ATen node as it is on the host (a view step or a fallback). ``UnsupportedError`` is how a
handler says the card cannot take the op with these arguments: the node then runs on the host.
"""

from __future__ import annotations

from typing import Any

import torch

from .collectives import KINDS as COLLECTIVES
from .graph import DEVICE_DTYPES, MATMUL_DTYPES, Node, Value


class UnsupportedError(Exception):
    """The card has no kernel for this op with these arguments; the message says why."""


class Builder:
    """Builds the graph: one ATen node at a time, kernels and host steps in program order."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.fx: torch.fx.Node | None = None
        self.computed: set[Value] = set()  # kernels' results and views of them: on the card
        self.permutes: dict[Value, tuple[Value, tuple[int, ...]]] = {}  # a permute of a card value: (it, perm)
        self._count = 0

    def value(self, shape: Any, dtype: torch.dtype, const: torch.Tensor | None = None) -> Value:
        self._count += 1
        return Value(f"t{self._count}", tuple(int(n) for n in shape), dtype, const=const)

    def kernel(self, op: str, inputs: list[Value], shape: Any, dtype: torch.dtype | None = None,
               carrier: torch.dtype | None = None, **attrs: Any) -> Value:
        """A kernel's result; ``carrier``: the device dtype of a bool or integer result. A 0-d result (T5's
        guard) is computed over (1,) and viewed as 0-d, as kernels have a dim at least."""
        if not tuple(shape):
            one = self.kernel(op, inputs, (1,), dtype, carrier, **attrs)
            out = view_of(self, one, ())
            out.carrier = carrier
            return out
        out = self.value(shape, dtype or inputs[0].dtype)
        out.carrier = carrier
        self.nodes.append(Node(op, inputs, [out], self.fx, attrs))
        self.computed.add(out)
        return out

    def const(self, scalar: float, like: Value) -> Value:
        """A Python scalar operand as a constant tensor of ``like``'s rank, every dim 1 (broadcast)."""
        data = torch.full((1,) * max(len(like.shape), 1), float(scalar), dtype=like.dtype)
        return self.value(data.shape, like.dtype, const=data)

    def arg(self, a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: self.env[n])


def device(*values: Value) -> None:
    for v in values:
        if v.dtype not in DEVICE_DTYPES:
            raise UnsupportedError(f"dtype {v.dtype} is not simulated (fp16, bf16 and fp32 are)")


def pt(x: Value) -> None:
    if x.dtype not in MATMUL_DTYPES:
        raise UnsupportedError(f"a {x.dtype} matmul: the PT array multiplies fp16 and bf16")


def out_shape(b: Builder) -> tuple[int, ...]:
    return tuple(b.fx.meta["val"].shape)


def operand(b: Builder, x: Any, like: Value) -> Value:
    return x if isinstance(x, Value) else b.const(x, like)


def view_of(b: Builder, x: Value, shape: tuple[int, ...], perm: tuple[int, ...] | None = None) -> Value:
    """A reshape (or, with ``perm``, a permute) the front end adds: dropping reduced dims, flattening
    a matmul operand, turning a transposed slice back."""
    out = b.value(shape, x.dtype)
    attrs = {"regroup": True} if perm is None else {"perm": perm}
    b.nodes.append(Node("reshape" if perm is None else "permute", [x], [out], b.fx, host="view",
                        reason="reshape" if perm is None else "permute", attrs=attrs))
    if x in b.computed:
        b.computed.add(out)
    return out


def permuted(b: Builder, x: Value, perm: tuple[int, ...]) -> Value:
    """``x.permute(perm)`` as a view, remembered so that pointwise ops on it can run in x's order."""
    out = view_of(b, x, tuple(x.shape[d] for d in perm), perm=perm)
    if x in b.computed:
        b.permutes[out] = (x, perm)
    return out


def cast(b: Builder, x: Value, dtype: torch.dtype | None) -> Value:
    """A ``to_dtype`` kernel between fp16 or bf16 and fp32 (the card's casts); no kernel when the
    dtype stays, nor for a bool or integer value carried in ``dtype`` already (a view of it as such)."""
    if dtype in (None, x.dtype):
        return x
    source = x.carrier or x.dtype
    if source == dtype:
        out = view_of(b, x, x.shape)
        out.dtype = dtype
        return out
    if torch.float32 not in (source, dtype) or dtype not in DEVICE_DTYPES:
        raise UnsupportedError(f"cast from {x.dtype} to {dtype} (the card casts between fp16 or bf16 and fp32)")
    return b.kernel("to_dtype", [x], x.shape, dtype)


def values(a: Any) -> list[Any]:
    out: list[Any] = []
    torch.fx.node.map_aggregate(a, lambda v: out.append(v) if isinstance(v, Value) else None)
    return out


def host(b: Builder, kind: str, reason: str, **attrs: Any) -> Any:
    """The ATen node runs on the CPU as it is (``kind`` "view", "fallback" or "collective"); its
    results are new values. ``attrs``: "regroup" (a view keeping the element order) or "perm" (a permute)."""
    fx = b.fx
    val = fx.meta["val"]
    many = isinstance(val, (tuple, list))
    outs = [b.value(t.shape, t.dtype) for t in (val if many else [val])]
    args, kwargs = b.arg(fx.args), b.arg(fx.kwargs)
    ins = values((args, kwargs))
    op = COLLECTIVES.get(fx.target, str(fx.target))
    b.nodes.append(Node(op, ins, outs, fx, host=kind, reason=reason, attrs={"args": args, "kwargs": kwargs, **attrs}))
    if kind == "view" and b.computed.intersection(ins):
        b.computed.update(outs)
    return tuple(outs) if many else outs[0]
