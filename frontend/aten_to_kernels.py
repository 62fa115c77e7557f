"""Pass 1: the Core ATen graph -> kernels (SuperDSC ops) and host steps.

Each ATen op maps to one or a few kernels over torch shapes; layouts come later (pass 3).
Python scalars become constant values. This module maps the compute ops; the view family
(permutes, reshapes, slices, cat) is view_ops.py's, the graph builder builder.py's. An op with no
mapping, or with an argument the card cannot take (a dtype, a rounding mode), becomes a
``fallback`` step: torch runs it on the CPU and the report names it.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable
from typing import Any

import torch

from spyre_emu.errors import SpyreEmuError

from .builder import Builder, UnsupportedError, cast, device, host, operand, out_shape, permuted, pt, view_of
from .collectives import KINDS as COLLECTIVES
from .decompositions import patches as _registered  # noqa: F401  (torch.ops.spyre_emu.patches)
from .graph import Graph, Node, Value, failure
from .kernel_ops import COMPARISONS
from .subgraphs import INVOKE_SUBGRAPH, region
from .topk import topk
from .view_ops import HANDLERS as VIEW_HANDLERS
from .view_ops import VIEWS

aten = torch.ops.aten


UNARY = {aten.neg: "neg", aten.abs: "abs", aten.exp: "exp", aten.log: "log", aten.sqrt: "sqrt",
         aten.rsqrt: "rsqrt", aten.reciprocal: "reciprocal", aten.tanh: "tanh", aten.sigmoid: "sigmoid",
         aten.relu: "relufwd", aten.silu: "silu", aten.gelu: "gelufwd", aten.cos: "cos", aten.sin: "sin"}
BINARY = {aten.add: "add", aten.sub: "sub", aten.mul: "mul", aten.div: "realdiv", aten.maximum: "maximum",
          aten.minimum: "minimum", aten.gt: "greater", aten.ge: "greaterequal", aten.lt: "less",
          aten.le: "lessequal", aten.eq: "equal", aten.ne: "notequal"}
REDUCTIONS = {aten.sum: "sum", aten.mean: "mean", aten.amax: "max", aten.amin: "min"}


def _unary(b: Builder, x: Value, **kwargs: Any) -> Value:
    device(x)
    return _in_storage_order(b, [x], lambda ins, shape: b.kernel(UNARY[b.fx.target.overloadpacket], ins, shape))


def _in_storage_order(b: Builder, inputs: list[Any], fn: Callable[[list[Any], tuple[int, ...]], Value]) -> Value:
    """``fn(inputs, output shape)``, a pointwise computation. When the card values among the inputs are all
    one permutation of values it computed (a convolution's channels-last rows seen as NCHW), it runs in
    their order, the other inputs (host data, scalars, values along one dim such as batch norm's
    per-channel factors) permuted back to match, and its result is that permutation of it: no
    restickify either side."""
    shape = out_shape(b)
    perms = {b.permutes[v][1] if v in b.permutes else None for v in inputs
             if isinstance(v, Value) and v in b.computed and sum(n > 1 for n in v.shape) > 1}
    if len(perms) != 1 or None in perms:
        return fn(inputs, shape)
    perm = perms.pop()
    back = tuple(sorted(range(len(perm)), key=perm.__getitem__))
    moved = [_moved_back(b, v, back) for v in inputs]
    return permuted(b, fn(moved, tuple(shape[d] for d in back)), perm)


def _moved_back(b: Builder, v: Any, back: tuple[int, ...]) -> Any:
    """An input of ``_in_storage_order`` in the card values' own order."""
    if not isinstance(v, Value):
        return v
    if v in b.permutes:
        return b.permutes[v][0]
    v = view_of(b, v, (1,) * (len(back) - len(v.shape)) + v.shape) if len(v.shape) < len(back) else v
    one_dim = sum(n > 1 for n in v.shape) <= 1  # then the permute keeps the element order: a reshape
    return view_of(b, v, tuple(v.shape[d] for d in back), perm=None if one_dim else back)


def _binary(b: Builder, x: Any, y: Any, alpha: float = 1, rounding_mode: str | None = None) -> Value:
    op = BINARY[b.fx.target.overloadpacket]
    if rounding_mode is not None:
        raise UnsupportedError(f"division with rounding_mode={rounding_mode!r}")
    return _in_storage_order(b, [x, y], lambda ins, shape: _binary_kernel(b, op, *ins, alpha, shape))


def _binary_kernel(b: Builder, op: str, x: Any, y: Any, alpha: float, shape: tuple[int, ...]) -> Value:
    like = x if isinstance(x, Value) else y
    x, y = _promoted(b, operand(b, x, like), operand(b, y, like))
    like = x
    if alpha != 1:
        y = b.kernel("mul", [y, b.const(alpha, y)], y.shape)
    if op not in COMPARISONS:
        return b.kernel(op, [x, y], shape, like.dtype)
    return b.kernel(op, [x, y], shape, torch.bool, like.dtype)


def _promoted(b: Builder, *values: Value) -> list[Value]:
    """Operands of mixed float dtypes cast to the one torch computes in (fp16 * fp32 is fp32)."""
    device(*values)
    common = values[0].dtype
    for v in values[1:]:
        common = torch.promote_types(common, v.dtype)
    return [cast(b, v, common) for v in values]


def _pow(b: Builder, x: Value, exponent: float) -> Value:
    """Integer powers as multiplications (square and multiply), +-0.5 as (r)sqrt."""
    device(x)
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
    return view_of(b, x, x.shape) if result is x else result


def _clamp(b: Builder, x: Value, lo: Any = None, hi: Any = None) -> Value:
    """``maximum`` by the lower bound, ``minimum`` by the upper; a tensor bound broadcasts (T5's guard
    clamps by a 0-d tensor)."""
    device(x)
    out = x
    for bound, op in ((lo, "maximum"), (hi, "minimum")):
        if bound is not None:
            out, limit = _promoted(b, out, operand(b, bound, out))
            out = b.kernel(op, [out, limit], out_shape(b))
    return out


def _isinf(b: Builder, x: Value) -> Value:
    """|x| == inf, a comparison (1.0 / 0.0 on the card)."""
    device(x)
    return b.kernel("equal", [b.kernel("abs", [x], x.shape), b.const(math.inf, x)], x.shape, torch.bool, x.dtype)


def _any(b: Builder, x: Value, dims: Any = None, keepdim: bool = False) -> Value:
    """any of a comparison's result: the max of its 1.0 / 0.0."""
    if x.carrier is None:
        raise UnsupportedError("any of a tensor that is not a comparison's result")
    out = _reduce_runs(b, x, dims, keepdim, "max")
    out.carrier = x.carrier  # the view dropping the reduced dims
    return out


def _where(b: Builder, cond: Value, x: Any, y: Any) -> Value:
    like = x if isinstance(x, Value) else y
    x, y = _promoted(b, operand(b, x, like), operand(b, y, like))
    return b.kernel("where3", [cond, x, y], out_shape(b), x.dtype)


def _reduce(b: Builder, x: Value, dims: Any = None, keepdim: bool = False, dtype: torch.dtype | None = None) -> Value:
    """A reduction to another dtype casts first, as torch accumulates in it."""
    device(x)
    return _reduce_runs(b, cast(b, x, dtype), dims, keepdim, REDUCTIONS[b.fx.target.overloadpacket])


def _reduce_runs(b: Builder, x: Value, dims: Any, keepdim: bool, op: str) -> Value:
    """One kernel per run of adjacent reduced dims of more than one element, the stick dim last, each
    keeping its dims."""
    rank = len(x.shape)
    dims = sorted({d % rank for d in ([dims] if isinstance(dims, int) else dims or range(rank))})
    dims = [d for d in dims if x.shape[d] > 1]  # over one element: the element (a 1x1 image's average pool)
    runs: list[list[int]] = []
    for d in dims:
        if runs and runs[-1][-1] == d - 1 and d != rank - 1:
            runs[-1].append(d)
        else:
            runs.append([d])
    out, shape = x, list(x.shape)
    for run in sorted(runs, key=lambda r: (r[-1] == rank - 1, -r[0])):  # inner runs first, the stick dim last
        shape = [1 if i in run else n for i, n in enumerate(shape)]
        out = b.kernel(op, [out], shape, carrier=x.carrier, dims=tuple(run))
    return view_of(b, out, out_shape(b)) if out is x or not keepdim else out


def _matmul(b: Builder, x: Value, y: Value) -> Value:
    device(x, y)
    pt(x)
    return b.kernel("batchmatmul", [x, y], out_shape(b))


def _addmm(b: Builder, bias: Value, x: Value, y: Value, beta: float = 1, alpha: float = 1) -> Value:
    out = _matmul(b, x, y)
    if alpha != 1:
        out = b.kernel("mul", [out, b.const(alpha, out)], out.shape)
    if beta != 1:
        bias = b.kernel("mul", [bias, b.const(beta, bias)], bias.shape)
    return b.kernel("add", [out, bias], out.shape)


def _layer_norm(b: Builder, x: Value, shape: list[int], w: Value | None, bias: Value | None, eps: float) -> tuple:
    """Spelled in primitives over the last dim; fusion makes it one ``layernorm`` kernel again."""
    device(x)
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
    device(x)
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
    device(x)
    return _softmax(b, cast(b, x, dtype), dim, False, safe=True)


def _patches(b: Builder, x: Value, kernel: list[int], stride: list[int], padding: list[int], dilation: list[int],
             pad: float, flat: bool) -> Value:
    """decompositions.patches: the card's ``patches`` kernel (a gather of whole channel sticks)."""
    device(x)
    return b.kernel("patches", [x], out_shape(b), image=list(x.shape[:3]), kernel=list(kernel), stride=list(stride),
                    padding=list(padding), dilation=list(dilation), pad=float(pad))


def _to_copy(b: Builder, x: Value, dtype: torch.dtype | None = None, **kwargs: Any) -> Value:
    if dtype in (None, x.dtype):
        return view_of(b, x, x.shape)
    if x.carrier is None:
        device(x)
    return cast(b, x, dtype)


HANDLERS: dict[Any, Callable[..., Any]] = {
    **dict.fromkeys(UNARY, _unary), **dict.fromkeys(BINARY, _binary), **dict.fromkeys(REDUCTIONS, _reduce),
    **VIEW_HANDLERS,
    aten.pow: _pow, aten.clamp: _clamp, aten.isinf: _isinf, aten.any: _any, aten.clamp_min: _clamp,
    aten.clamp_max: lambda b, x, hi: _clamp(b, x, None, hi), aten.where: _where,
    aten.mm: _matmul, aten.bmm: _matmul, aten.addmm: _addmm, aten.native_layer_norm: _layer_norm,
    aten._softmax: _softmax, aten._safe_softmax: _safe_softmax, aten._to_copy: _to_copy,
    torch.ops.spyre_emu.patches: _patches, aten.topk: topk,
}


def build_graph(gm: torch.fx.GraphModule) -> Graph:
    """Walk the ATen graph in order; every node becomes kernels, a view step or a fallback."""
    b, inputs, outputs = Builder(), [], []
    for fx in gm.graph.nodes:
        b.fx = fx
        if fx.op == "placeholder":
            val = fx.meta["val"]
            b.env[fx] = b.value(val.shape, val.dtype) if isinstance(val, torch.Tensor) else val
            inputs.append(b.env[fx])
        elif fx.op == "output":
            outputs = [b.env.get(n) if isinstance(n, torch.fx.Node) else None for n in fx.args[0]]
        else:
            _step(b, gm, fx)
    return Graph(inputs, _live(b.nodes, outputs), outputs)


def _step(b: Builder, owner: torch.fx.GraphModule, fx: torch.fx.Node) -> None:
    """One node of ``owner``'s graph (the traced graph, or a region's body) into the graph."""
    b.fx = fx
    if fx.op == "get_attr":
        data = operator.attrgetter(fx.target)(owner)
        if not isinstance(data, torch.nn.Module):  # a region's subgraph is read by its calls, below
            b.env[fx] = b.value(data.shape, data.dtype, const=data)
    elif fx.target is operator.getitem:
        b.env[fx] = b.env[fx.args[0]][fx.args[1]]
    elif fx.target is INVOKE_SUBGRAPH:
        b.env[fx] = _region(b, owner, fx)
    else:
        b.env[fx] = _call(b, fx)


def _region(b: Builder, gm: torch.fx.GraphModule, call: torch.fx.Node) -> tuple[Any, ...]:
    """A call of a repeated region, read in place (subgraphs.walkable): the body's nodes, in the order the
    expansion would copy them, each bound to this call's operands; every value a new one, as in a copy.
    The body's nodes are rebound by the next call, which is done with this one first."""
    sub, operands, steps, outs = region(gm, call)
    for place, arg in operands:
        b.env[place] = b.env[arg] if isinstance(arg, torch.fx.Node) else arg
    for fx in steps:
        _step(b, sub, fx)
    return tuple(b.env[o] for o in outs)


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
        return host(b, "collective", "through host memory (spyreccl)")
    packet = getattr(fx.target, "overloadpacket", None)
    handler = HANDLERS.get(packet)
    if handler is None:
        return host(b, "fallback", "no kernel for this op")
    mark = len(b.nodes)
    args, kwargs = b.arg(fx.args), b.arg(fx.kwargs)
    try:
        return handler(b, *args, **kwargs)
    except UnsupportedError as exc:
        del b.nodes[mark:]
        return host(b, "view" if packet in VIEWS else "fallback", str(exc))
    except SpyreEmuError:
        raise
    except Exception as exc:  # a bug of this module: say where, not only what
        raise failure(fx, [list(a.shape) for a in args if isinstance(a, Value)], exc) from exc
