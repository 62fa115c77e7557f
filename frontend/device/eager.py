"""Eager ops on the simulated card: each op, for each signature (op, operand shapes and dtypes,
scalar arguments), is traced to a one-op ATen graph and compiled by the front end's passes once;
every call then runs it as a compiled graph would (kernel programs simulated, functional results;
identical programs are simulated once, through the result cache). An op the front end has no
kernel for runs on the CPU and is counted as a fallback, with the front end's reason.

An in-place op runs its functional twin (``add_`` as ``add``) and writes the result into its
argument, so the card runs it too.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_flatten, tree_unflatten

from spyre_emu.config import Machine
from spyre_emu.errors import SpyreEmuError
from spyre_emu.host import load_host

from ..compile import compile_graph
from ..decompositions import decompositions
from ..options import Options
from ..program import Segment
from ..report import FrontendReport
from ..runtime import CompiledGraph
from ..tensor_parallel import shard

OPTIONS = Options()


@dataclass
class Ran:
    """How one call ran: ``report`` when the card ran kernels, and the CPU fallbacks' reasons."""

    name: str
    report: FrontendReport | None = None
    fallbacks: list[str] = field(default_factory=list)
    program: str = ""   # which kernel program ran: the op and its operands' shapes and dtype


@dataclass
class _Plan:
    graph: CompiledGraph | None
    reason: str = ""


class Eager:
    def __init__(self, machine: Machine):
        self.machine, self.cpu = machine, load_host(OPTIONS.host).cpu
        self.plans: dict[Any, _Plan] = {}
        self.decompositions = decompositions()

    def run(self, op: torch._ops.OpOverload, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Ran]:
        target, original = _functional(op), kwargs
        writes = [a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        if target is not op:  # the functional twin reads what the op reads
            kwargs = {k: v for k, v in kwargs.items() if k not in writes}
        flat, spec = tree_flatten((args, kwargs))
        key = (target, spec, tuple(_signature(a) for a in flat))
        if key not in self.plans:
            self.plans[key] = self._plan(target, flat, spec)
        plan = self.plans[key]
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        if plan.graph is None:
            return op(*args, **original), Ran(str(op), fallbacks=[plan.reason])
        outputs, rep = plan.graph.run(*tensors)
        result = outputs[0] if len(outputs) == 1 else tuple(outputs)
        if target is not op:  # in place or out=: the card's result written into the argument
            dest = original[writes[0]] if writes[0] in original else args[0]
            if dest.shape != result.shape:
                dest.resize_(result.shape)
            result = dest.copy_(result)
        program = f"{target} {[tuple(t.shape) for t in tensors]} {tensors[0].dtype}"
        return result, Ran(str(target), rep, [f"{f['op']}: {f['reason']}" for f in rep.fallbacks], program=program)

    def _plan(self, op: torch._ops.OpOverload, flat: list[Any], spec: Any) -> _Plan:
        tensors = [a for a in flat if isinstance(a, torch.Tensor)]
        if any(isinstance(a, torch.Generator) for a in flat):
            return _Plan(None, "random numbers are drawn on the host (the device's generator)")
        if not tensors or any(t.dtype not in (torch.float16, torch.bfloat16, torch.float32) for t in tensors):
            return _Plan(None, "integer, boolean or tensor-free operands have no kernel")

        def call(*ts: torch.Tensor) -> list[Any]:
            it = iter(ts)
            args, kwargs = tree_unflatten([next(it) if isinstance(a, torch.Tensor) else a for a in flat], spec)
            out = op(*args, **kwargs)
            return list(out) if isinstance(out, tuple | list) else [out]
        try:
            gm = make_fx(call, decomposition_table=self.decompositions, tracing_mode="fake")(*tensors)
        except (RuntimeError, TypeError, NotImplementedError) as exc:
            return _Plan(None, f"not traceable to one ATen graph ({' '.join(str(exc).split())[:120]})")
        try:
            with warnings.catch_warnings():  # the front end's fallback summary: the device log counts them
                warnings.simplefilter("ignore")
                compiled = compile_graph(gm, OPTIONS, self.machine)
        except SpyreEmuError as exc:
            return _Plan(None, exc.message)
        if not any(isinstance(step, Segment) for step in compiled.steps):
            reasons = [n.reason for n in compiled.graph.nodes if n.host == "fallback"]
            return _Plan(None, reasons[0] if reasons else "no kernel for this op")
        return _Plan(CompiledGraph(gm, compiled, self.machine, self.cpu, OPTIONS, shard(gm, 1)))


def _functional(op: torch._ops.OpOverload) -> torch._ops.OpOverload:
    """The op that computes what an in-place or out= op writes: ``add_.Tensor`` -> ``add.Tensor``,
    ``sum.IntList_out`` -> ``sum.dim_IntList`` (the overload taking the same arguments less ``out``);
    any other op is itself."""
    name = op._schema.name.split("::")[1]
    written = {a.name for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write}
    if name.endswith("_") and not name.startswith("_"):
        name, written = name[:-1], {"self"} - written
    elif not written:
        return op
    reads = [(a.name, str(a.type)) for a in op._schema.arguments if a.name not in written]
    packet = getattr(torch.ops.aten, name, None)
    for overload in packet.overloads() if packet is not None else ():
        twin = getattr(packet, overload)
        if [(a.name, str(a.type)) for a in twin._schema.arguments] == reads and not twin._schema.is_mutable:
            return twin
    return op


def _signature(a: Any) -> Any:
    if isinstance(a, torch.Tensor):
        return ("tensor", tuple(a.shape), a.dtype)
    if isinstance(a, torch.Generator):
        return "generator"
    return repr(a)
