"""Pass 3: the device tensor of every kernel operand, and which views cost nothing.

Every device tensor is in torch-spyre's default stick layout over its own host shape, its
``dshape``: the value's dims with the leading ones merged ((rows, last) for most kernels, the
torch shape for matmuls, (before, dim, between, last) for a reduction over a dim outside the
stick). The stick dim is always the value's last dim. A view that keeps the element order and
regroups only dims the device tensor merges is folded: the result is the same device tensor.

Where a kernel wants an operand in another shape than the one it sits in (another grouping, a
broadcast the kernel cannot express, a value computed on the host), the operand is copied in
from the host in the wanted shape (an upload). Uploads of host-prepared data (weights, inputs,
constants) are input preparation; uploads of values the card or a CPU fallback computed are copies over
PCIe, and ``crossings`` lists them for the report. A ReStickify kernel on the card will replace
these round trips once the lowering has one for a change of grouping.
"""

from __future__ import annotations

import math

from .graph import DEVICE_DTYPES, DeviceTensor, Graph, Node, Value, is_grouping, rows_shape

REDUCTIONS = ("sum", "mean", "max", "min")


def assign_layouts(graph: Graph) -> None:
    """Fold free views, give every kernel's operands a device tensor; ``graph.nodes`` loses folded views."""
    for value in _all_values(graph):
        value.storage, value.dshape, value.from_device = None, None, False
    graph.tensors = {}
    kept = []
    for node in graph.nodes:
        if node.is_kernel:
            _kernel(graph, node)
        elif node.host == "view" and node.attrs.get("regroup") and _fold(node):
            continue
        else:  # a fallback's results cross to the card like computed values: their copies are priced
            for out in node.outputs:
                out.from_device = node.host == "fallback" or any(v.root.from_device for v in node.inputs)
        kept.append(node)
    graph.nodes = kept


def _all_values(graph: Graph) -> list[Value]:
    values = [v for v in graph.inputs if isinstance(v, Value)]
    for node in graph.nodes:
        values += node.inputs + node.outputs
    return values


def current(v: Value) -> tuple[int, ...] | None:
    """The device shape ``v`` can be read in where it sits now, if it sits on the card."""
    r = v.root
    return r.dshape if r.dshape is not None and is_grouping(v.shape, r.dshape) else None


def _fold(node: Node) -> bool:
    """A regrouping view of a host value, or of a device tensor whose grouping it keeps, is free."""
    src, out = node.inputs[0], node.outputs[0]
    if src.root.dshape is not None and not is_grouping(out.shape, src.root.dshape):
        return False
    out.storage = src
    return True


def device_dtype(v: Value) -> str:
    return DEVICE_DTYPES[v.carrier or v.dtype]


def _kernel(graph: Graph, node: Node) -> None:
    out = node.outputs[0]
    dtype = device_dtype(out)
    wants = _operand_shapes(node)
    names = [_tensor_for(graph, v, dshape, expand, dtype) for v, (dshape, expand) in zip(node.inputs, wants[:-1],
                                                                                        strict=True)]
    out.dshape, out.from_device = wants[-1][0], True
    graph.tensors[out.name] = DeviceTensor(out.name, out, out.dshape, dtype, upload=False)
    node.tensors = [*names, out.name]


def _operand_shapes(node: Node) -> list[tuple[tuple[int, ...], tuple[int, ...] | None]]:
    """(device shape, broadcast-to shape or None) for each input, then the output."""
    out = node.outputs[0]
    if node.op == "batchmatmul":
        return [(v.shape, None) for v in (*node.inputs, out)]
    if node.op in REDUCTIONS:
        x, lo, hi = node.inputs[0], node.attrs["dims"][0], node.attrs["dims"][-1]
        if hi == len(x.shape) - 1:
            full = current(x) or rows_shape(x.shape)
            return [(full, None), ((*full[:-1], 1), None)]
        s = x.shape  # the reduced dims lo..hi become one device dim
        full = (math.prod(s[:lo]), math.prod(s[lo:hi + 1]), math.prod(s[hi + 1:-1]), s[-1])
        return [(full, None), ((full[0], 1, *full[2:]), None)]
    kept = _kept_dims(node)
    return [*(_broadcast(v.shape, out.shape, kept) for v in node.inputs), (rows_shape(out.shape, kept), None)]


def _kept_dims(node: Node) -> int:
    """Keep the grouping of the first full-size operand already on the card (a batched matmul's result)."""
    out = node.outputs[0]
    for v in node.inputs:
        if v.shape == out.shape and (at := current(v)) is not None:
            return len(at) - 1
    return 1


def _broadcast(shape: tuple[int, ...], out: tuple[int, ...], kept: int) -> tuple[tuple[int, ...], tuple | None]:
    """An operand of ``shape`` broadcast to ``out``, grouped as the output: size-1 groups broadcast."""
    shape = (1,) * (len(out) - len(shape)) + tuple(shape)
    cut = max(len(out) - kept, 0)
    lead, out_lead = shape[:cut], out[:cut]
    tail_ok = all(n in (1, m) for n, m in zip(shape[cut:], out[cut:], strict=True))
    if lead == out_lead or all(n == 1 for n in lead):
        if tail_ok:
            return rows_shape(shape, kept), None
    return rows_shape(out, kept), tuple(out)


def _tensor_for(graph: Graph, v: Value, dshape: tuple[int, ...], expand: tuple | None, dtype: str) -> str:
    """The device tensor holding ``v`` in ``dshape``: where it sits, or a copy from the host."""
    if expand is None and current(v) == dshape:
        return v.root.name
    for t in graph.tensors.values():
        if t.upload and t.value is v and t.dshape == dshape and t.expand == expand:
            return t.name
    name = f"{v.root.name}_in{len(graph.tensors)}"
    graph.tensors[name] = DeviceTensor(name, v, dshape, dtype, upload=True, expand=expand)
    return name


def crossings(graph: Graph) -> list[tuple[str, str, int]]:
    """PCIe round trips of values the card computed: (direction, value, bytes), each copy once."""
    out: list[tuple[str, str, int]] = []
    down: set[Value] = set()

    def download(v: Value) -> None:
        r = v.root
        if r.dshape is not None and r not in down:
            down.add(r)
            out.append(("d2h", r.name, math.prod(r.dshape) * 2))  # fp16 and bf16
    for node in graph.nodes:
        if not node.is_kernel:
            for v in node.inputs:
                download(v)
    for t in graph.tensors.values():
        if t.upload and t.value.root.from_device:
            download(t.value)
            out.append(("h2d", t.name, math.prod(t.dshape) * 2))
    return out
