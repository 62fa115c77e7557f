"""Dynamo's graph -> the ATen graph in one trace, where aot_autograd's work is not needed.

aot_autograd (inference) runs the graph twice: once functionalized to collect what it mutates and
aliases, then again to trace it, functionalized, with the decompositions. A graph that mutates
nothing has nothing to functionalize, so one ``make_fx`` trace with the same decompositions gives
the same ATen graph (tests/frontend/test_trace.py compares the two on the test models) at about
half the cost. What the single trace does not handle falls back to aot_autograd: a graph holding
parameters or buffers as attributes, inputs that are not plain tensors or have symbolic shapes,
and any graph whose trace mutates a tensor (in place or through ``out=``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch._guards import detect_fake_mode
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode, unset_fake_temporarily
from torch.fx import traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx
from torch.fx.experimental.symbolic_shapes import free_symbols


def trace_inference(gm: torch.fx.GraphModule, example_inputs: list[Any],
                    decompositions: dict[Any, Callable[..., Any]]) -> torch.fx.GraphModule | None:
    """The ATen graph of ``gm`` traced once with ``decompositions``, or None where aot_autograd is needed."""
    if not _traceable(gm, example_inputs):
        return None
    mode = detect_fake_mode(example_inputs) or FakeTensorMode()
    with unset_fake_temporarily():  # _fake's meta tensors are plain ones, whatever mode is active
        fakes = [_fake(mode, t) for t in example_inputs]

    def run(*args: Any) -> Any:
        with fx_traceback.preserve_node_meta():  # ATen nodes keep the user's source lines
            return torch.fx.Interpreter(gm).run(*args)

    with enable_python_dispatcher(), mode:
        traced = make_fx(run, decomposition_table=decompositions)(*fakes)
    graphs = [sub for sub in traced.modules() if isinstance(sub, torch.fx.GraphModule)]  # with regions' bodies
    if any(_mutates(n) for sub in graphs for n in sub.graph.nodes):
        return None
    if len(graphs) == 1:  # with a repeated region, the backend walks it or expands it (subgraphs.py)
        traced.graph.eliminate_dead_code()
        traced.recompile()
    return traced


def _fake(mode: FakeTensorMode, t: torch.Tensor) -> torch.Tensor:
    """``t`` as the trace's input. A tensor that owns its storage from the start is made from its
    shape, strides and dtype alone, which is all an inference trace reads of it (nothing is written,
    and gradients are off or refused): a meta tensor of that layout wrapped as a fake tensor on
    ``t``'s device, which is what ``torch.empty_strided`` under the fake mode returns (torch's
    ``constructors`` rule), without the dispatch (about 0.2 ms an input: 444 of them in a 40-layer
    decode; ``from_tensor`` costs three times that). A view keeps ``from_tensor``, which reproduces
    its storage offset and its base."""
    if t._is_view() or t.storage_offset() != 0:
        return mode.from_tensor(t)
    return FakeTensor(mode, torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta"), t.device)


def _traceable(gm: torch.fx.GraphModule, example_inputs: list[Any]) -> bool:
    """Plain tensors of static shapes in, no parameters or buffers held by the graph itself, nothing
    written in place."""
    if next(gm.parameters(), None) is not None or next(gm.buffers(), None) is not None:
        return False
    if not all(type(t) in (torch.Tensor, torch.nn.Parameter) for t in example_inputs):
        return False
    nodes = [n for sub in gm.modules() if isinstance(sub, torch.fx.GraphModule) for n in sub.graph.nodes]
    if any(_writes(n) for n in nodes if n.op in ("call_function", "call_method")):
        return False
    values = [n.meta.get("example_value") for n in gm.graph.nodes if n.op == "placeholder"]
    return all(isinstance(v, torch.Tensor) and not free_symbols(v) for v in values)


IN_PLACE = {operator.setitem, operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
            operator.imod, operator.ipow, operator.iand, operator.ior, operator.ixor, operator.ilshift,
            operator.irshift, operator.imatmul}


def _writes(node: torch.fx.Node) -> bool:
    """A Dynamo node that looks in place (``x[i] = y``, ``x += y``, ``x.add_(y)``): a cheap guess that
    spares a trace bound to be refused; the trace's own check below is what decides."""
    if node.target in IN_PLACE:
        return True
    if node.op == "call_function" and getattr(node.target, "__module__", None) == "_operator":
        return False  # operator.and_, or_, not_: the names of keywords, not in-place ops
    name = node.target if node.op == "call_method" else getattr(node.target, "__name__", "")
    return isinstance(name, str) and name.endswith("_") and not name.endswith("__")


def _mutates(node: torch.fx.Node) -> bool:
    schema = getattr(node.target, "_schema", None)
    return node.op == "call_function" and schema is not None and schema.is_mutable
