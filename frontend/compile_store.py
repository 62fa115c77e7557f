"""The passes' result (``Compiled``) in the result cache, keyed by the ATen graph: a warm first call
in a fresh process reads it instead of running the passes again.

``compile_graph`` is a deterministic function of what it reads: the ATen graph (every node's name,
op, target, arguments, ``meta["val"]`` and source line, and the data of every constant a ``get_attr``
reads), the options, the machine, which inputs are parameters, and the code (the simulator's,
which ``memo.key`` covers, the front end's and torch's version, covered here). ``key`` hashes all of
it; a graph holding anything it cannot spell exactly (a symbolic size, an object of unknown type) has
no key and is compiled as before. The ``Compiled`` is stored as a pickle in which every ATen node
and graph module is a reference by name, bound on reading to the nodes of the graph being compiled,
which the key makes the same graph: host steps run the new graph's ops and the report quotes its
source lines. The entry is bytes, unpickled on every hit, so two compiled graphs
never share one ``Compiled`` (the backend sets its ``transfers``).
"""

from __future__ import annotations

import copyreg
import hashlib
import io
import pickle
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import torch
from torch._subclasses.fake_tensor import FakeTensor

from spyre_emu import memo
from spyre_emu.config import Machine

from .compile import Compiled, apply_policy
from .options import Options


class _UnknownError(Exception):
    """Something in the graph the key cannot spell: no key, compile as before."""


@cache
def _code_version() -> bytes:
    """The front end's sources (``memo.key`` covers the simulator's) and torch's version."""
    sources = sorted(Path(__file__).parent.rglob("*.py"))
    return hashlib.sha256(b"".join(p.read_bytes() for p in sources) + torch.__version__.encode()).digest()


def key(gm: torch.fx.GraphModule, options: Options, machine: Machine, parameters: Sequence[bool]) -> str | None:
    """The cache key of ``compile_graph(gm, options, machine, parameters)``, or None: no key (the cache
    is off, or the graph holds something ``_spell`` does not know)."""
    if not (options.cache and memo.enabled()):
        return None
    h = hashlib.sha256()
    try:
        for owner, graph in _graphs(gm):
            h.update(repr(owner).encode())
            for node in graph.graph.nodes:
                h.update(_node(graph, node).encode())
                h.update(b"\0")
    except _UnknownError:
        return None
    return memo.key(b"compiled", _code_version(), h.digest(), repr(options).encode(), repr(machine).encode(),
                    repr(list(parameters)).encode())


def load(k: str | None, gm: torch.fx.GraphModule, options: Options) -> Compiled | None:
    """The stored ``Compiled`` under ``k``, bound to ``gm``'s nodes, its fallback policy applied as
    ``compile_graph`` applies it; None on a miss."""
    data = memo.lookup(k) if k is not None else None
    if not isinstance(data, bytes):
        return None
    _BOUND.append(({(owner, n.name): n for owner, graph in _graphs(gm) for n in graph.graph.nodes}, dict(_graphs(gm))))
    try:
        compiled = pickle.loads(data)
    except Exception:  # an entry that does not read back here (as memo.lookup: a miss)
        return None
    finally:
        _BOUND.pop()
    apply_policy(compiled.graph, options)
    return compiled


def store(k: str | None, compiled: Compiled, gm: torch.fx.GraphModule) -> None:
    """Keep ``compiled`` under ``k`` (nothing without a key, nor when something in it does not pickle).
    Nodes, graph modules and plain tensors are pickled by type (``dispatch_table``): a ``persistent_id``
    would be a Python call for every object of the pickle (0.4 s for a 40-layer decode)."""
    if k is None:
        return
    nodes = {id(n): (owner, n.name) for owner, graph in _graphs(gm) for n in graph.graph.nodes}
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = {
        **copyreg.dispatch_table, torch.fx.Node: lambda n: (_bound_node, nodes[id(n)]),
        torch.Tensor: _reduce_tensor, FakeTensor: _refuse,
        **{type(graph): lambda m, owner=owner: (_bound_module, (owner,)) for owner, graph in _graphs(gm)}}
    try:
        pickler.dump(compiled)
    except Exception:  # something that does not pickle (a node of another graph, a fake tensor): not stored
        return
    memo.store(k, buffer.getvalue())


_BOUND: list[tuple[dict[tuple[str, str], torch.fx.Node], dict[str, torch.fx.GraphModule]]] = []  # load's graph


def _bound_node(owner: str, name: str) -> torch.fx.Node:
    """A stored reference to an ATen node: the graph being compiled's node of that name."""
    return _BOUND[-1][0][owner, name]


def _bound_module(owner: str) -> torch.fx.GraphModule:
    return _BOUND[-1][1][owner]


def _refuse(t: FakeTensor) -> tuple:
    """A fake tensor has no data to store, and torch would pickle it as a real one: the entry is not stored."""
    raise TypeError("a fake tensor in the compiled graph")


def _reduce_tensor(t: torch.Tensor) -> tuple:
    """A CPU tensor that owns its storage (the constants the passes fold: a few hundred in a 40-layer
    model) as its dtype, shape and bytes: torch's own pickle saves each through ``torch.save``, about
    0.15 ms a tensor to read back. Any other tensor is pickled as torch pickles it."""
    if (t.device.type != "cpu" or t.requires_grad or not t.is_contiguous() or t.storage_offset() != 0
            or t.untyped_storage().nbytes() != t.numel() * t.element_size()):
        return t.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
    return _tensor, (t.dtype, tuple(t.shape), _raw(t))


def _tensor(dtype: torch.dtype, shape: tuple[int, ...], raw: bytes) -> torch.Tensor:
    """The tensor ``_reduce_tensor`` stored."""
    if not raw:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)


def _graphs(gm: torch.fx.GraphModule) -> Iterator[tuple[str, torch.fx.GraphModule]]:
    """``gm`` ("") and every graph module under it (a repeated region's body), by qualified name."""
    for name, sub in gm.named_modules():
        if isinstance(sub, torch.fx.GraphModule):
            yield name, sub


def _node(owner: torch.fx.GraphModule, node: torch.fx.Node) -> str:
    """Everything the passes read of one node: name, op, target, arguments, value and source line, and
    for a ``get_attr`` the attribute itself (a constant's data, or a body by its name)."""
    parts = [node.name, node.op, _target(node.target), _spell(node.args), _spell(node.kwargs),
             _spell(node.meta.get("val")), repr(node.meta.get("stack_trace"))]
    if node.op == "get_attr":
        attr = owner
        for part in node.target.split("."):
            attr = getattr(attr, part)
        parts.append(f"module {node.target}" if isinstance(attr, torch.fx.GraphModule) else _spell(attr))
    return "\x1f".join(parts)


def _target(target: Any) -> str:
    if isinstance(target, str):
        return target
    if isinstance(target, torch._ops.OpOverload | torch._ops.HigherOrderOperator):
        return f"op {target}"
    qualname = getattr(target, "__qualname__", None)
    if qualname is None or "<" in qualname:  # a lambda or a local function: no stable name
        raise _UnknownError(target)
    return f"fn {target.__module__}.{qualname}"


ATOMS = (int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format)


def _spell(a: Any) -> str:
    """An argument or a value, exactly: nodes by name, tensors by their metadata (values are fake or
    meta: the data is never read), numbers by ``repr`` (exact for floats)."""
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if isinstance(a, torch.SymInt | torch.SymFloat | torch.SymBool):
        raise _UnknownError(a)
    if isinstance(a, ATOMS):
        return f"{type(a).__name__}:{a!r}"
    if isinstance(a, torch.Tensor):
        meta = f"T{tuple(a.shape)}{a.stride()}{a.dtype}{a.device}+{a.storage_offset()}{'g' * a.requires_grad}"
        return meta if isinstance(a, FakeTensor) or a.device.type == "meta" else meta + _data(a)
    if isinstance(a, list | tuple):
        return f"{type(a).__name__}[{','.join(map(_spell, a))}]"
    if isinstance(a, dict):
        return "{" + ",".join(f"{k!r}:{_spell(v)}" for k, v in a.items()) + "}"
    if isinstance(a, slice):
        return f"slice({_spell(a.start)},{_spell(a.stop)},{_spell(a.step)})"
    raise _UnknownError(a)


def _data(t: torch.Tensor) -> str:
    """A real tensor's bytes, hashed (a tensor whose bytes torch will not show, sparse or quantized, has none)."""
    try:
        raw = _raw(t.detach().cpu().contiguous())
    except (RuntimeError, TypeError) as exc:
        raise _UnknownError(t) from exc
    return hashlib.sha256(raw).hexdigest()


def _raw(t: torch.Tensor) -> bytes:
    """A contiguous CPU tensor's bytes."""
    return t.reshape(-1).view(torch.uint8).numpy().tobytes()
