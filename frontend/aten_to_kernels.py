"""Pass 1: the Core ATen graph -> kernels (SuperDSC ops) and host steps.

Each ATen op maps to one or a few kernels over torch shapes; layouts come later (pass 3).
Python scalars become constant values. The view family becomes ``view`` steps: permutes and
reshapes, which the layout pass resolves (free, or restickified on the card), and the rest
(slices, cat, embedding), which run on the host; a broadcasting expand and RoPE's cat of
slices become kernels. An op with no mapping, or with an argument the card cannot take (a
dtype, a rounding mode), becomes a ``fallback`` step: torch runs it on the CPU and the report
names it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from spyre_emu.errors import SpyreEmuError

from .collectives import KINDS as COLLECTIVES
from .graph import DEVICE_DTYPES, MATMUL_DTYPES, Graph, Node, Value, failure
from .kernel_ops import COMPARISONS

aten = torch.ops.aten


class UnsupportedError(Exception):
    """The card has no kernel for this op with these arguments; the message says why."""


class Builder:
    """Builds the graph: one ATen node at a time, kernels and host steps in program order."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.env: dict[torch.fx.Node, Any] = {}
        self.fx: torch.fx.Node | None = None
        self._count = 0

    def value(self, shape: Any, dtype: torch.dtype, const: torch.Tensor | None = None) -> Value:
        self._count += 1
        return Value(f"t{self._count}", tuple(int(n) for n in shape), dtype, const=const)

    def kernel(self, op: str, inputs: list[Value], shape: Any, dtype: torch.dtype | None = None, **attrs: Any) -> Value:
        out = self.value(shape, dtype or inputs[0].dtype)
        self.nodes.append(Node(op, inputs, [out], self.fx, attrs))
        return out

    def const(self, scalar: float, like: Value) -> Value:
        """A Python scalar operand as a constant tensor of ``like``'s rank, every dim 1 (broadcast)."""
        data = torch.full((1,) * max(len(like.shape), 1), float(scalar), dtype=like.dtype)
        return self.value(data.shape, like.dtype, const=data)

    def arg(self, a: Any) -> Any:
        return torch.fx.node.map_arg(a, lambda n: self.env[n])


def _device(*values: Value) -> None:
    for v in values:
        if v.dtype not in DEVICE_DTYPES:
            raise UnsupportedError(f"dtype {v.dtype} is not simulated (fp16, bf16 and fp32 are)")


def _out_shape(b: Builder) -> tuple[int, ...]:
    return tuple(b.fx.meta["val"].shape)


def _operand(b: Builder, x: Any, like: Value) -> Value:
    return x if isinstance(x, Value) else b.const(x, like)


UNARY = {aten.neg: "neg", aten.abs: "abs", aten.exp: "exp", aten.log: "log", aten.sqrt: "sqrt",
         aten.rsqrt: "rsqrt", aten.reciprocal: "reciprocal", aten.tanh: "tanh", aten.sigmoid: "sigmoid",
         aten.relu: "relufwd", aten.silu: "silu", aten.gelu: "gelufwd", aten.cos: "cos", aten.sin: "sin"}
BINARY = {aten.add: "add", aten.sub: "sub", aten.mul: "mul", aten.div: "realdiv", aten.maximum: "maximum",
          aten.minimum: "minimum", aten.gt: "greater", aten.ge: "greaterequal", aten.lt: "less",
          aten.le: "lessequal", aten.eq: "equal", aten.ne: "notequal"}
REDUCTIONS = {aten.sum: "sum", aten.mean: "mean", aten.amax: "max", aten.amin: "min"}
VIEWS = {aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.clone, aten.alias,
         aten.expand, aten.permute, aten.slice, aten.select, aten.cat, aten.embedding, aten.index,
         aten.repeat, aten.split_with_sizes, aten.unbind}


def _unary(b: Builder, x: Value, **kwargs: Any) -> Value:
    _device(x)
    return b.kernel(UNARY[b.fx.target.overloadpacket], [x], x.shape)


def _binary(b: Builder, x: Any, y: Any, alpha: float = 1, rounding_mode: str | None = None) -> Value:
    op = BINARY[b.fx.target.overloadpacket]
    if rounding_mode is not None:
        raise UnsupportedError(f"division with rounding_mode={rounding_mode!r}")
    like = x if isinstance(x, Value) else y
    x, y = _promoted(b, _operand(b, x, like), _operand(b, y, like))
    like = x
    if alpha != 1:
        y = b.kernel("mul", [y, b.const(alpha, y)], y.shape)
    if op not in COMPARISONS:
        return b.kernel(op, [x, y], _out_shape(b), like.dtype)
    out = b.kernel(op, [x, y], _out_shape(b), torch.bool)
    out.carrier = like.dtype
    return out


def _promoted(b: Builder, *values: Value) -> list[Value]:
    """Operands of mixed float dtypes cast to the one torch computes in (fp16 * fp32 is fp32)."""
    _device(*values)
    common = values[0].dtype
    for v in values[1:]:
        common = torch.promote_types(common, v.dtype)
    return [_cast(b, v, common) for v in values]


def _pow(b: Builder, x: Value, exponent: float) -> Value:
    """Integer powers as multiplications (square and multiply), +-0.5 as (r)sqrt."""
    _device(x)
    if exponent in (0.5, -0.5):
        return b.kernel("sqrt" if exponent > 0 else "rsqrt", [x], x.shape)
    if exponent != int(exponent) or exponent == 0:
        raise UnsupportedError(f"pow with exponent {exponent}")
    n, result, base = abs(int(exponent)), None, x
    while n:
        if n & 1:
            result = base if result is None else b.kernel("mul", [result, base], x.shape)
        n >>= 1
        if n:
            base = b.kernel("mul", [base, base], x.shape)
    if exponent < 0:
        return b.kernel("reciprocal", [result], x.shape)
    return _view_of(b, x, x.shape) if result is x else result


def _clamp(b: Builder, x: Value, lo: float | None = None, hi: float | None = None) -> Value:
    _device(x)
    if isinstance(lo, Value) or isinstance(hi, Value):
        raise UnsupportedError("clamp with tensor bounds")
    out = x
    if lo is not None:
        out = b.kernel("maximum", [out, b.const(lo, x)], x.shape)
    if hi is not None:
        out = b.kernel("minimum", [out, b.const(hi, x)], x.shape)
    return out


def _where(b: Builder, cond: Value, x: Any, y: Any) -> Value:
    like = x if isinstance(x, Value) else y
    x, y = _promoted(b, _operand(b, x, like), _operand(b, y, like))
    return b.kernel("where3", [cond, x, y], _out_shape(b), x.dtype)


def _reduce(b: Builder, x: Value, dims: Any = None, keepdim: bool = False, dtype: torch.dtype | None = None) -> Value:
    """One kernel per run of adjacent reduced dims, the stick dim last, each keeping its dims (a
    reduction to another dtype casts first, as torch accumulates in it)."""
    _device(x)
    x = _cast(b, x, dtype)
    rank = len(x.shape)
    dims = sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims or range(rank))})
    runs: list[list[int]] = []
    for d in dims:
        if runs and runs[-1][-1] == d - 1 and d != rank - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    out, shape = x, list(x.shape)
    for run in sorted(runs, key=lambda r: (r[-1] == rank - 1, -r[0])):  # inner runs first, the stick dim last
        shape = [1 if i in run else n for i, n in enumerate(shape)]
        out = b.kernel(REDUCTIONS[b.fx.target.overloadpacket], [out], shape, dims=tuple(run))
    if not keepdim:
        out = _view_of(b, out, _out_shape(b))
    return out


def _view_of(b: Builder, x: Value, shape: tuple[int, ...]) -> Value:
    """A reshape the front end adds (dropping reduced dims, flattening a matmul operand)."""
    out = b.value(shape, x.dtype)
    b.nodes.append(Node("reshape", [x], [out], b.fx, host="view", reason="reshape", attrs={"regroup": True}))
    return out


def _matmul(b: Builder, x: Value, y: Value) -> Value:
    _device(x, y)
    _pt(x)
    return b.kernel("batchmatmul", [x, y], _out_shape(b))


def _pt(x: Value) -> None:
    if x.dtype not in MATMUL_DTYPES:
        raise UnsupportedError(f"a {x.dtype} matmul: the PT array multiplies fp16 and bf16")


def _addmm(b: Builder, bias: Value, x: Value, y: Value, beta: float = 1, alpha: float = 1) -> Value:
    out = _matmul(b, x, y)
    if alpha != 1:
        out = b.kernel("mul", [out, b.const(alpha, out)], out.shape)
    if beta != 1:
        bias = b.kernel("mul", [bias, b.const(beta, bias)], bias.shape)
    return b.kernel("add", [out, bias], out.shape)


def _layer_norm(b: Builder, x: Value, shape: list[int], w: Value | None, bias: Value | None, eps: float) -> tuple:
    """Spelled in primitives over the last dim; fusion makes it one ``layernorm`` kernel again."""
    _device(x)
    if len(shape) != 1:
        raise UnsupportedError("layer norm over more than the last dim")
    if {u.args[1] for u in b.fx.users if u.target is operator.getitem} - {0}:
        raise UnsupportedError("layer norm whose mean or rstd is used")
    last, rows = (len(x.shape) - 1,), (*x.shape[:-1], 1)
    mean = b.kernel("mean", [x], rows, dims=last)
    centred = b.kernel("sub", [x, mean], x.shape)
    var = b.kernel("mean", [b.kernel("mul", [centred, centred], x.shape)], rows, dims=last)
    rstd = b.kernel("rsqrt", [b.kernel("add", [var, b.const(eps, var)], rows)], rows)
    out = b.kernel("mul", [centred, rstd], x.shape)
    out = out if w is None else b.kernel("mul", [out, w], x.shape)
    return (out if bias is None else b.kernel("add", [out, bias], x.shape)), None, None


def _softmax(b: Builder, x: Value, dim: int, half_to_float: bool, safe: bool = False) -> Value:
    """exp(x - max) / sum over the last dim, in primitives; fusion makes it one ``softmax`` kernel.

    ``safe`` (torch's ``_safe_softmax``, what attention calls): a row of -inf gives zeros. The row max
    is clamped to the lowest finite value, so exp gives 0, and the sum to 1, which only a row of zeros
    is below (any other row holds exp(0) = 1)."""
    _device(x)
    if dim % len(x.shape) != len(x.shape) - 1 or half_to_float:
        raise UnsupportedError("softmax over a dim other than the last")
    last, rows = (len(x.shape) - 1,), (*x.shape[:-1], 1)
    top = b.kernel("max", [x], rows, dims=last)
    if safe:
        top = b.kernel("maximum", [top, b.const(torch.finfo(x.dtype).min, top)], rows)
    e = b.kernel("exp", [b.kernel("sub", [x, top], x.shape)], x.shape)
    total = b.kernel("sum", [e], rows, dims=last)
    if safe:
        total = b.kernel("maximum", [total, b.const(1.0, total)], rows)
    return b.kernel("realdiv", [e, total], x.shape)


def _safe_softmax(b: Builder, x: Value, dim: int, dtype: torch.dtype | None = None) -> Value:
    _device(x)
    return _softmax(b, _cast(b, x, dtype), dim, False, safe=True)


def _view(b: Builder, x: Value, *args: Any, **kwargs: Any) -> Value:
    """A view-family op. Permutes and reshapes are resolved by the layout pass (on the card, or
    free); an expand that broadcasts is an ``identity`` kernel; the rest run on the host."""
    val, op = b.fx.meta["val"], b.fx.target.overloadpacket
    if not isinstance(val, torch.Tensor):
        raise UnsupportedError("a view with several results")
    if op is aten.expand and tuple(val.shape) != x.shape:
        _device(x)
        return b.kernel("identity", [x], val.shape)
    if op is aten.permute:
        return _host(b, "view", "permute", perm=tuple(d % len(x.shape) for d in args[0]))
    return _host(b, "view", op.__name__, regroup=op in ORDER_KEEPING or op is aten.expand)


ORDER_KEEPING = (aten.view, aten._unsafe_view, aten.reshape, aten.unsqueeze, aten.squeeze, aten.clone, aten.alias)


def _cat(b: Builder, parts: list[Value], dim: int = 0) -> Value:
    """A cat with one non-empty part (a DynamicCache's first step: an empty cache and the first keys)
    is that part. Copies of one value along its last dim (RoPE's cat((freqs, freqs))) are a broadcast
    (an identity kernel). A cat of one value's (negated) slices along its last dim, as rotate_half, is
    the value times a constant matrix of 0 and +-1 (exact), a matmul on the card instead of host data
    movement."""
    kept = [(p, fx) for p, fx in zip(parts, b.fx.args[0], strict=True) if math.prod(p.shape)]
    if len(kept) == 1:
        return _view_of(b, kept[0][0], _out_shape(b))
    parts = [p for p, _ in kept]
    slices = [_signed_slice(fx) for _, fx in kept]
    rank = len(parts[0].shape)
    if dim % rank != rank - 1 or None in slices or len({s[0] for s in slices}) != 1:
        raise UnsupportedError("a cat other than of slices of one value's last dim")
    x = b.env[slices[0][0]]
    _device(x)
    n, m = x.shape[-1], sum(end - start for _, start, end, _ in slices)
    if all((start, end, sign) == (0, n, 1.0) for _, start, end, sign in slices):  # copies: a broadcast, any dtype
        once = _view_of(b, x, (*x.shape[:-1], 1, n))
        return _view_of(b, b.kernel("identity", [once], (*x.shape[:-1], len(slices), n)), _out_shape(b))
    _pt(x)
    matrix, at = torch.zeros(n, m, dtype=x.dtype), 0
    for _, start, end, sign in slices:
        matrix[torch.arange(start, end), torch.arange(at, at + end - start)] = sign
        at += end - start
    rows = _view_of(b, x, (math.prod(x.shape[:-1]), n))
    out = b.kernel("batchmatmul", [rows, b.value((n, m), x.dtype, const=matrix)], (rows.shape[0], m))
    return _view_of(b, out, _out_shape(b))


def _signed_slice(fx: torch.fx.Node) -> tuple[torch.fx.Node, int, int, float] | None:
    """(source, start, end, sign) of ``x[..., start:end]``, ``x`` itself, or their negation, along
    the last dim."""
    sign = 1.0
    if fx.target is aten.neg.default:
        sign, fx = -1.0, fx.args[0]
    if fx.target is not aten.slice.Tensor:
        return fx, 0, fx.meta["val"].shape[-1], sign
    src, dim, start, end, step = (*fx.args, *[None] * (5 - len(fx.args)))
    size = src.meta["val"].shape
    if (dim or 0) % len(size) != len(size) - 1 or step not in (None, 1):
        return None
    n = size[-1]
    start, end = (min(max(i + n if i < 0 else i, 0), n) for i in (start or 0, n if end is None else end))
    return src, start, end, sign


def _to_copy(b: Builder, x: Value, dtype: torch.dtype | None = None, **kwargs: Any) -> Value:
    if dtype in (None, x.dtype):
        return _view_of(b, x, x.shape)
    _device(x)
    return _cast(b, x, dtype)


def _cast(b: Builder, x: Value, dtype: torch.dtype | None) -> Value:
    """A ``to_dtype`` kernel between fp16 or bf16 and fp32 (the card's casts); no kernel when the
    dtype stays."""
    if dtype in (None, x.dtype):
        return x
    if torch.float32 not in (x.dtype, dtype) or dtype not in DEVICE_DTYPES or x.carrier is not None:
        raise UnsupportedError(f"cast from {x.dtype} to {dtype} (the card casts between fp16 or bf16 and fp32)")
    return b.kernel("to_dtype", [x], x.shape, dtype)


HANDLERS: dict[Any, Callable[..., Any]] = {
    **dict.fromkeys(UNARY, _unary), **dict.fromkeys(BINARY, _binary), **dict.fromkeys(REDUCTIONS, _reduce),
    **dict.fromkeys(VIEWS, _view),
    aten.pow: _pow, aten.clamp: _clamp, aten.clamp_min: _clamp,
    aten.clamp_max: lambda b, x, hi: _clamp(b, x, None, hi), aten.where: _where,
    aten.mm: _matmul, aten.bmm: _matmul, aten.addmm: _addmm, aten.native_layer_norm: _layer_norm,
    aten._softmax: _softmax, aten._safe_softmax: _safe_softmax, aten._to_copy: _to_copy, aten.cat: _cat,
}


def _values(a: Any) -> list[Any]:
    out: list[Any] = []
    torch.fx.node.map_aggregate(a, lambda v: out.append(v) if isinstance(v, Value) else None)
    return out


def _host(b: Builder, kind: str, reason: str, **attrs: Any) -> Any:
    """The ATen node runs on the CPU as it is (``kind`` "view" or "fallback"); its results are new
    values. ``attrs``: "regroup" (a view keeping the element order) or "perm" (a permute)."""
    fx = b.fx
    val = fx.meta["val"]
    many = isinstance(val, (tuple, list))
    outs = [b.value(t.shape, t.dtype) for t in (val if many else [val])]
    args, kwargs = b.arg(fx.args), b.arg(fx.kwargs)
    op = COLLECTIVES.get(fx.target, str(fx.target))
    b.nodes.append(Node(op, _values((args, kwargs)), outs, fx, host=kind, reason=reason,
                        attrs={"args": args, "kwargs": kwargs, **attrs}))
    return tuple(outs) if many else outs[0]


def build_graph(gm: torch.fx.GraphModule) -> Graph:
    """Walk the ATen graph in order; every node becomes kernels, a view step or a fallback."""
    b, inputs, outputs = Builder(), [], []
    for fx in gm.graph.nodes:
        b.fx = fx
        if fx.op == "placeholder":
            val = fx.meta["val"]
            b.env[fx] = b.value(val.shape, val.dtype) if isinstance(val, torch.Tensor) else val
            inputs.append(b.env[fx])
        elif fx.op == "get_attr":
            data = getattr(gm, fx.target)
            b.env[fx] = b.value(data.shape, data.dtype, const=data)
        elif fx.op == "output":
            outputs = [b.env.get(n) if isinstance(n, torch.fx.Node) else None for n in fx.args[0]]
        elif fx.target is operator.getitem:
            b.env[fx] = b.env[fx.args[0]][fx.args[1]]
        else:
            b.env[fx] = _call(b, fx)
    return Graph(inputs, _live(b.nodes, outputs), outputs)


def _live(nodes: list[Node], outputs: list[Any]) -> list[Node]:
    """The nodes whose results are used (inference graphs are pure): a slice that a rewritten cat
    no longer needs is dropped."""
    read = {v for v in outputs if isinstance(v, Value)}
    live = []
    for node in reversed(nodes):
        if any(v in read for v in node.outputs):
            live.append(node)
            read.update(node.inputs)
    return live[::-1]


def _call(b: Builder, fx: torch.fx.Node) -> Any:
    if fx.target in COLLECTIVES:  # between the cards of a tensor-parallel graph (tensor_parallel.py)
        return _host(b, "collective", "through host memory (spyreccl)")
    packet = getattr(fx.target, "overloadpacket", None)
    handler = HANDLERS.get(packet)
    if handler is None:
        return _host(b, "fallback", "no kernel for this op")
    mark = len(b.nodes)
    args, kwargs = b.arg(fx.args), b.arg(fx.kwargs)
    try:
        return handler(b, *args, **kwargs)
    except UnsupportedError as exc:
        del b.nodes[mark:]
        return _host(b, "view" if packet in VIEWS else "fallback", str(exc))
    except SpyreEmuError:
        raise
    except Exception as exc:  # a bug of this module: say where, not only what
        raise failure(fx, [list(a.shape) for a in args if isinstance(a, Value)], exc) from exc
