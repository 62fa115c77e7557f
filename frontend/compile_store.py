"""The passes' result (``Compiled``) in the result cache, keyed by the ATen graph: a warm first call
in a fresh process reads it instead of running the passes again.

``compile_graph`` is a deterministic function of what it reads: the ATen graph (every node's name,
op, target, arguments, ``meta["val"]`` and source line, and the data of every constant a ``get_attr``
reads), the options, the machine, which inputs are parameters, and the code (the simulator's,
which ``memo.key`` covers, the front end's and torch's version, covered here). ``key`` hashes all of
it; a graph holding anything it cannot spell exactly (a symbolic size, an object of unknown type) has
no key and is compiled as before. The ``Compiled`` is stored as a pickle in which every ATen node
and graph module is a reference by name (``persistent_id``), bound on reading to the nodes of the
graph being compiled, which the key makes the same graph: host steps run the new graph's ops and
errors quote its source lines. The entry is bytes, unpickled on every hit, so two compiled graphs
never share one ``Compiled`` (the backend sets its ``transfers``).
"""

from __future__ import annotations

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
    compiled = _Unpickler(io.BytesIO(data), gm).load()
    apply_policy(compiled.graph, options)
    return compiled


def store(k: str | None, compiled: Compiled, gm: torch.fx.GraphModule) -> None:
    """Keep ``compiled`` under ``k`` (nothing without a key, nor when something in it does not pickle)."""
    if k is None:
        return
    buffer = io.BytesIO()
    try:
        _Pickler(buffer, gm).dump(compiled)
    except (pickle.PicklingError, TypeError, AttributeError, KeyError):
        return
    memo.store(k, buffer.getvalue())


class _Pickler(pickle.Pickler):
    """ATen nodes and graph modules as references by name; plain tensors as their bytes (``_reduce_tensor``)."""

    def __init__(self, file: io.BytesIO, gm: torch.fx.GraphModule):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.nodes = {id(n): (owner, n.name) for owner, graph in _graphs(gm) for n in graph.graph.nodes}
        self.owners = {id(graph): owner for owner, graph in _graphs(gm)}

    def persistent_id(self, obj: Any) -> tuple | None:
        if isinstance(obj, torch.fx.Node):
            return ("node", *self.nodes[id(obj)])
        if isinstance(obj, torch.fx.GraphModule):
            return ("module", self.owners[id(obj)])
        return None

    def reducer_override(self, obj: Any) -> Any:
        return _reduce_tensor(obj)


class _Unpickler(pickle.Unpickler):
    """References by name bound to ``gm``'s nodes and graph modules."""

    def __init__(self, file: io.BytesIO, gm: torch.fx.GraphModule):
        super().__init__(file)
        self.nodes = {(owner, n.name): n for owner, graph in _graphs(gm) for n in graph.graph.nodes}
        self.modules = dict(_graphs(gm))

    def persistent_load(self, pid: tuple) -> Any:
        return self.nodes[pid[1:]] if pid[0] == "node" else self.modules[pid[1]]


def _reduce_tensor(obj: Any) -> Any:
    """A plain CPU tensor that owns its storage (the constants the passes fold: a few hundred in a 40-layer
    model) as its dtype, shape and bytes: torch's own pickle saves each through ``torch.save``, about
    0.15 ms a tensor to read back. Anything else is pickled as usual."""
    if (type(obj) is not torch.Tensor or obj.device.type != "cpu" or obj.requires_grad or not obj.is_contiguous()
            or obj.storage_offset() != 0 or obj.untyped_storage().nbytes() != obj.numel() * obj.element_size()):
        return NotImplemented
    return _tensor, (obj.dtype, tuple(obj.shape), obj.reshape(-1).view(torch.uint8).numpy().tobytes())


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
    """A real tensor's bytes, hashed."""
    raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)
    return hashlib.sha256(raw.numpy().tobytes()).hexdigest()
