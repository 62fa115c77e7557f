"""Pass 3: the device tensor of every kernel operand, restickified on the card where neighbours disagree.

Every device tensor is in torch-spyre's default stick layout over its own host shape, its
``dshape``: consecutive dims of the value merged. A matmul takes the torch shape; a reduction
(rows, last) or (before, reduced, between, last); a pointwise or row-wise kernel keeps the
grouping of an operand already on the card when every input broadcasts over it (the kernels
broadcast over size-1 dims, the stick dim included) or is host data (weights, inputs, constants:
broadcast on the host and copied in, as input preparation), else the fewest dims that broadcast,
restickifying what the card holds in another grouping. The stick dim is always the last.

Views (permutes and reshapes, views.py) cost nothing where they are made. A kernel that reads a
value in a dshape no device tensor holds it in gets one: from the card, by one or two
``ReStickifyOpHBM`` kernels inserted before it (gathers of whole sticks, or 64 x 64 transposes
when the stick dim changes); else copied in from the host (an upload). Uploads of host-prepared
data (weights, inputs, constants) are input preparation; uploads of values the card or a CPU
fallback computed are PCIe round trips, which ``crossings`` lists for the report: views the
restickify lowering refuses, and host steps (slices, cat, embedding, fallbacks).

With ``weights="stored"`` (``graph.stored``) a parameter is on the card in the default layout of its
own shape, loaded once, as torch-spyre's compiled graph receives it: a kernel reading it in another
layout (a linear's transposed weight) gets restickify kernels from it, which run every call; one
reading the same bytes (a norm's weight as (1, n)) reads it as it is. A weight the restickify rule
cannot move, or that the host broadcasts for its kernel, stays prepared on the host.
"""

from __future__ import annotations

import math

from spyre_emu.config import DTYPE_BYTES
from spyre_emu.kernel_program import default_layout
from spyre_emu.kernel_program.ops import OPS

from .graph import DEVICE_DTYPES, DeviceTensor, Graph, Node, Value, blame, rows_shape
from .views import Step, groups, is_grouping, permuted, plan, relative

REDUCTIONS = ("sum", "mean", "max", "min")
RESTICKIFY = "ReStickifyOpHBM"
INDEX_DTYPE = "int32"  # the device dtype of an embedding's indices


def assign_layouts(graph: Graph, host_views: set[Value]) -> None:
    """Resolve views, give every kernel's operands a device tensor, insert restickify kernels;
    ``graph.nodes`` loses the views. ``host_views``: values whose restickify the lowering refused."""
    for value in _all_values(graph):
        value.storage, value.order, value.dshape, value.from_device = None, None, None, False
    graph.tensors, graph.held = {}, {}
    kept: list[Node] = []
    for node in graph.nodes:
        if node.is_kernel:
            with blame(node):
                _kernel(graph, node, kept, host_views)
        elif not (node.host == "view" and _view(node)):
            for out in node.outputs:  # a fallback's results cross to the card like computed values: priced
                out.from_device = node.host == "fallback" or (node.host != "collective" and any(
                    v.root.from_device for v in node.inputs))  # a collective's copies are the host model's
            kept.append(node)
    graph.nodes = _unread_windows_dropped(graph, kept)


def _all_values(graph: Graph) -> list[Value]:
    values = [v for v in graph.inputs if isinstance(v, Value)]
    for node in graph.nodes:
        values += node.inputs + node.outputs
    return values


def _view(node: Node) -> bool:
    """A permute or reshape of one value: its result lists the value's elements in another order."""
    src, out = node.inputs[0], node.outputs[0]
    perm = node.attrs.get("perm")
    if perm is None and not node.attrs.get("regroup"):
        return False
    order = src.elements if perm is None else permuted(src.elements, src.shape, perm)
    if order is None:
        return False
    out.storage, out.order = src.root, order
    return True


def device_dtype(v: Value) -> str:
    return DEVICE_DTYPES[v.carrier or v.dtype]


def current(graph: Graph, v: Value) -> tuple[int, ...] | None:
    """A device shape ``v`` can be read in for free, if the card computed it: a device tensor
    holding its elements in its order, in a shape merging its dims."""
    return next((t.dshape for t in graph.held.get(v.root, ()) if not t.upload
                 and t.value.elements == v.elements and is_grouping(v.shape, t.dshape)), None)


def _kernel(graph: Graph, node: Node, kept: list[Node], host_views: set[Value]) -> None:
    out = node.outputs[0]
    dtype = device_dtype(out)
    wants = _operand_shapes(graph, node)
    names = [_tensor_for(graph, v, dshape, _input_dtype(node, i, dtype), kept, host_views, expand)
             for i, (v, (dshape, expand)) in enumerate(zip(node.inputs, wants[:-1], strict=True))]
    out.dshape, out.from_device = wants[-1][0], True
    graph.add_tensor(DeviceTensor(out.name, out, out.dshape, dtype, upload=False))
    node.tensors = [*names, out.name]
    kept.append(node)


def _input_dtype(node: Node, i: int, dtype: str) -> str:
    """A kernel's tensors are in its output's dtype (a bool operand in 1.0 / 0.0); a cast's input is in
    its own, an embedding's indices are int32."""
    if node.op == "to_dtype":
        return device_dtype(node.inputs[i])
    return INDEX_DTYPE if node.op == "embedding" and i == 1 else dtype


Want = tuple[tuple[int, ...], tuple[int, ...] | None]  # a device shape, and the torch shape to broadcast to first


def _operand_shapes(graph: Graph, node: Node) -> list[Want]:
    """The device shape (and host broadcast) of each input, then of the output."""
    out = node.outputs[0]
    if node.op in ("batchmatmul", "embedding"):
        return [(v.shape, None) for v in (*node.inputs, out)]
    if node.op == "patches":  # the image as the card holds it (any grouping ending in the channels); the windows
        held = current(graph, node.inputs[0])  # as a matmul (rows, KK·C) or a reduction over KK reads them
        x = held if held is not None and held[-1] == out.shape[-1] else rows_shape(node.inputs[0].shape)
        return [(x, None), (out.shape if len(out.shape) == 2 else (out.shape[0], out.shape[1], 1, out.shape[2]), None)]
    if node.op == RESTICKIFY:
        return _window_shapes(graph, node)
    if node.op == "cat":
        return _cat_shapes(node)
    if node.op in REDUCTIONS:
        x, lo, hi = node.inputs[0], node.attrs["dims"][0], node.attrs["dims"][-1]
        if hi == len(x.shape) - 1:  # the card's grouping of x, if it keeps the reduced dim its own
            held = current(graph, x)
            full = held if held is not None and held[-1] == x.shape[-1] else rows_shape(x.shape)
            return [(full, None), ((*full[:-1], 1), None)]
        s = x.shape  # the reduced dims lo..hi become one device dim
        if lo == hi == 0:  # x's layout keeps its first dim just outside the stick: so does (first, between, last)'s
            full = (s[0], math.prod(s[1:-1]), s[-1])
            return [(full, None), ((1, *full[1:]), None)]
        full = (math.prod(s[:lo]), math.prod(s[lo:hi + 1]), math.prod(s[hi + 1:-1]), s[-1])
        return [(full, None), ((full[0], 1, *full[2:]), None)]
    return _broadcast_shapes(graph, node)


def _window_shapes(graph: Graph, node: Node) -> list[Want]:
    """A slice (view_ops.window) or a query tile's window (query_tiles.py): x grouped with each sliced dim a device
    dim of its own and the dims between them merged, (before, sliced, between, ..., last) (the card's grouping when
    the stick dim is sliced and it has one along it), the output the same grouping narrowed; or, for a transposed
    window, x as (rows, last) and the output (sliced, rows). Sets ``window`` and ``perm``."""
    x, (cuts, transposed) = node.inputs[0], node.attrs["slice"]
    s, dims = x.shape, [d for d, _, _ in cuts]
    if dims == [len(s) - 1]:
        held = current(graph, x)
        full = held if held is not None and held[-1] == s[-1] and not transposed else rows_shape(s)
        at = {len(full) - 1: cuts[0][1:]}
    else:
        bounds = [-1, *dims, len(s) - 1]
        full = tuple(n for a, b in zip(bounds, bounds[1:], strict=False) for n in (math.prod(s[a + 1:b]), s[b]))
        at = {2 * j + 1: cut[1:] for j, cut in enumerate(cuts)}
    node.attrs["window"] = [i for d, n in enumerate(full) for i in at.get(d, (0, n))]
    node.attrs["perm"] = [1, 0] if transposed else list(range(len(full)))
    narrowed = tuple(b - a for a, b in (at.get(d, (0, n)) for d, n in enumerate(full)))
    out = node.outputs[0].shape if transposed else narrowed
    return [(full, None), (out, None)]


def _cat_shapes(node: Node) -> list[Want]:
    """A cat: every part and the output grouped alike, the joined dim a device dim of its own: (before,
    joined, between, last) without the dims of size 1 around it, or (rows, last) along the last dim.
    Sets ``dim``, the joined dim among the device dims."""
    along, shapes = node.attrs["along"], [v.shape for v in (*node.inputs, node.outputs[0])]
    if along == len(shapes[0]) - 1:
        node.attrs["dim"] = 1
        return [(rows_shape(s), None) for s in shapes]
    full = [(math.prod(s[:along]), s[along], math.prod(s[along + 1:-1]), s[-1]) for s in shapes]
    kept = [d for d, n in enumerate(full[0]) if n > 1 or d in (1, 3)]
    node.attrs["dim"] = kept.index(1)
    return [(tuple(f[d] for d in kept), None) for f in full]


def _broadcast_shapes(graph: Graph, node: Node) -> list[Want]:
    """A grouping of the output every input broadcasts over: an operand's on the card (host data
    may be broadcast on the host for it; a pointwise kernel's input may also cover a merged group
    with its leading dims, a key-padding mask the scores' (B·H, L, L), so that neither is moved), else
    the output's dims with as few leading ones merged as the inputs allow (all of them kept apart
    always works)."""
    out = node.outputs[0].shape
    on_card = [d for v in node.inputs if v.shape == out and (d := current(graph, v)) is not None]
    candidates = [(d, True) for d in on_card]
    candidates += [(rows_shape(out, kept), False) for kept in range(1, max(len(out), 1) + 1)]
    pointwise = OPS[node.op].family == "pointwise"
    for dshape, held in candidates:
        wants = [_want(v, out, dshape, held, held and pointwise) for v in node.inputs]
        if None not in wants:
            return [*wants, (dshape, None)]
    raise AssertionError(f"no grouping of {out} for {[v.shape for v in node.inputs]}")


def _want(v: Value, out: tuple[int, ...], dshape: tuple[int, ...], host_expands: bool,
          divides: bool) -> Want | None:
    """How input ``v`` is read by a kernel over ``dshape`` (a grouping of ``out``): broadcast by the
    kernel (over leading dims of a group with ``divides``), or host data broadcast on the host when
    ``host_expands``."""
    grouped = _grouped((1,) * (len(out) - len(v.shape)) + tuple(v.shape), out, dshape, divides)
    if grouped is not None:
        return grouped, None
    if host_expands and v.root.dshape is None and not v.root.from_device:
        return dshape, out
    return None


def _grouped(shape: tuple[int, ...], out: tuple[int, ...], dshape: tuple[int, ...],
             divides: bool) -> tuple[int, ...] | None:
    """An input of ``shape`` (``out``'s rank, each dim equal or 1) in ``dshape``'s grouping of
    ``out``, if each group of dims is wholly broadcast or wholly not; with ``divides`` also a group
    whose leading dims are whole and the rest broadcast, outside the stick dim, which a pointwise kernel
    reads at merged index h // (m / n) (docs/kernel-program.md): a (B, 1, L) mask over (B·H, L, L)."""
    real = [d for d, n in enumerate(out) if n > 1]
    runs = groups(tuple(out[d] for d in real), dshape)
    sizes = []
    for i, run in enumerate(runs):
        whole = [shape[real[j]] > 1 for j in run]
        mixed = len(set(whole)) > 1
        if mixed and (not divides or i == len(runs) - 1 or whole != sorted(whole, reverse=True)):
            return None
        sizes.append(math.prod(shape[real[j]] for j in run))
    return tuple(sizes)


def _tensor_for(graph: Graph, v: Value, dshape: tuple[int, ...], dtype: str, kept: list[Node],
                host_views: set[Value], expand: tuple[int, ...] | None = None) -> str:
    """The device tensor holding ``v`` in ``dshape``: one the card holds, one restickified from
    those, or a copy from the host (broadcast to ``expand`` first)."""
    for t in graph.held.get(v.root, ()):
        if t.value.elements == v.elements and t.dshape == dshape and t.expand == expand:
            return t.name
    if v.root in graph.stored and v not in host_views and expand is None:
        name = _from_stored(graph, v, dshape, dtype, kept)
        if name is not None:
            return name
    if v.root.dshape is not None and v not in host_views and expand is None:
        sources = [(steps, t) for t in graph.held.get(v.root, ()) if not t.upload
                   and (rel := relative(t.value.elements, v.elements)) is not None
                   and (steps := plan(rel, t.dshape, dshape)) is not None]
        if sources:
            steps, source = min(sources, key=lambda s: len(s[0]))
            return _restickify(graph, v, source, steps, dtype, kept)
    name = f"{v.root.name}_in{len(graph.tensors)}"
    graph.add_tensor(DeviceTensor(name, v, dshape, dtype, upload=True, expand=expand))
    return name


def _from_stored(graph: Graph, v: Value, dshape: tuple[int, ...], dtype: str, kept: list[Node]) -> str | None:
    """A stored parameter's view ``v`` in ``dshape``, restickified from the parameter as the card holds
    it; None when that is the layout the card holds it in already, or no restickify moves it there."""
    root = v.root
    stored = root.shape or (1,)
    if v.elements == root.elements and same_layout(stored, dshape, dtype):
        return None
    order = relative(root.elements, v.elements)
    steps = None if order is None else plan(order, stored, dshape)
    if steps is None:
        return None
    name = f"{root.name}_stored"
    if name not in graph.tensors:
        graph.add_tensor(DeviceTensor(name, root, stored, dtype, upload=True))
    return _restickify(graph, v, graph.tensors[name], steps, dtype, kept)


def same_layout(a: tuple[int, ...], b: tuple[int, ...], dtype: str) -> bool:
    """Whether the default layouts of two groupings of the same elements put every element at the same
    place: their device dims of more than one position agree in size and step ((n,) and (1, n) do)."""
    def placed(shape: tuple[int, ...]) -> list[tuple[int, int]]:
        layout = default_layout(shape, dtype)
        return [(n, s) for n, s in zip(layout.device_size, layout.stride_map, strict=True) if n > 1]
    return placed(a) == placed(b)


def _restickify(graph: Graph, v: Value, source: DeviceTensor, steps: list[Step], dtype: str,
                kept: list[Node]) -> str:
    """Append restickify kernels moving ``source`` into ``v``'s order, the last in its dshape."""
    x = source
    for i, (_, perm, shape) in enumerate(steps):
        if i == len(steps) - 1:
            y = v
        else:  # an intermediate, itself a view of the root (its elements in its own order)
            order = permuted(x.value.elements, x.dshape, perm)
            y = Value(f"{v.name}_t{len(graph.tensors)}", shape, v.dtype, storage=v.root, order=order)
        name = f"{v.name}_r{len(graph.tensors)}"
        graph.add_tensor(DeviceTensor(name, y, shape, dtype, upload=False))
        reads, attrs = (x.value, x.name), {"perm": list(perm), "view": v}
        if i == 0 and steps[0][0] != x.dshape:  # x read in a finer shape of the same elements
            attrs["x_shape"] = list(steps[0][0])
        window = _window_of(kept, x.name) if "x_shape" not in attrs and i == 0 else None
        if window is not None:  # read the slice's window of its input: one copy fewer
            reads, attrs["window"] = (window.inputs[0], window.tensors[0]), window.attrs["window"]
        kept.append(Node(RESTICKIFY, [reads[0]], [y], None, attrs, name=f"k{name}", tensors=[reads[1], name]))
        x = graph.tensors[name]
    return x.name


def _window_of(kept: list[Node], tensor: str) -> Node | None:
    """The slice kernel (view_ops.window, not transposed) that wrote ``tensor``: its output is its input's
    window in the same sticks, so a restickify of it may read the window of the input instead."""
    return next((k for k in kept if k.is_kernel and k.op == RESTICKIFY and k.tensors[-1] == tensor
                 and "slice" in k.attrs and not k.attrs["slice"][1]), None)


def _unread_windows_dropped(graph: Graph, kept: list[Node]) -> list[Node]:
    """Slice kernels whose result only restickify kernels read, through their windows, are not run."""
    read = {n for k in kept if k.is_kernel for n in k.tensors[:-1]}
    needed = {v.root for k in kept if not k.is_kernel for v in k.inputs}
    needed |= {v.root for v in graph.outputs if isinstance(v, Value)}
    needed |= {graph.tensors[n].value.root for n in read if graph.tensors[n].upload}  # copied in from the host
    unread = [k for k in kept if k.is_kernel and "slice" in k.attrs and k.tensors[-1] not in read
              and k.outputs[0] not in needed]
    for k in unread:
        del graph.tensors[k.tensors[-1]]
    return [k for k in kept if k not in unread]


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
        if not node.is_kernel and node.host != "collective":
            for v in node.inputs:
                download(v)
    for t in graph.tensors.values():
        if t.upload and t.value.root.from_device:
            download(t.value)
            out.append(("h2d", t.name, math.prod(t.dshape) * DTYPE_BYTES[t.dtype]))
    return out

