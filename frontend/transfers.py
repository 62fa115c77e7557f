"""A step's own host↔card copies: what its caller passes in each call, and what it returns.

A serving step copies its per-call inputs to the card (token ids or embeddings, positions, masks, a
KV cache the caller holds on the host) and its results back (logits, this step's keys and values).
The model's state is not copied per step: parameters and buffers are loaded once, and constants are
folded at compile time. Which inputs are per call is read from Dynamo's graph: a placeholder whose
source is an argument of the call, not an attribute of the module. The copies themselves follow the
program: a per-call input crosses once for every device tensor a kernel reads it in (an input no
kernel reads crosses nothing), and an output crosses back when the card computed it (a kernel or a
collective; an output a host step computed is already there). Over several cards, each rank copies
its own slices in; a result split over the cards comes back from each, a replicated one from rank 0. Round trips of
host steps are ``layout.crossings``; these are the step's ends. The host model prices them
(drawer.py), with graph construction on the data path or not.
"""

from __future__ import annotations

import math

import torch

from spyre_emu.config import DTYPE_BYTES

from .graph import Graph, Value


def per_call_inputs(gm: torch.fx.GraphModule, example_inputs: list) -> list[str | None]:
    """For each placeholder of Dynamo's graph: where the caller passes it from (``L['cache'][3]``), or
    None for module state."""
    places = [n for n in gm.graph.nodes if n.op == "placeholder"]
    sources = [getattr(n.meta.get("grapharg"), "source", None) for n in places]
    return [_name(src) if _from_caller(src) and not isinstance(ex, torch.nn.Parameter) else None
            for src, ex in zip(sources, example_inputs, strict=True)]


def argument(source: str) -> str:
    """The call's argument a per-call input comes from: ``L['cache'][3]`` -> ``cache``."""
    return source.split("'")[1] if source.startswith("L['") else source


def _name(source: object) -> str:
    name = source.name  # a property in newer torch, a method in older
    return name() if callable(name) else name


def _from_caller(source: object) -> bool:
    """An argument of the call, reached through no module (``self.w`` is state, ``cache[3]`` is not)."""
    while source is not None:
        kind = type(source).__name__
        if "NNModule" in kind or "ParamBuffer" in kind:
            return False
        if kind == "LocalSource":
            return bool(getattr(source, "is_input", False))
        source = getattr(source, "base", None)
    return False


def aten_per_call(per_call: list[str | None], aten_inputs: int) -> list[str | None]:
    """The same for aot_autograd's inputs: the module's own lifted parameters come first, then Dynamo's."""
    return [None] * (aten_inputs - len(per_call)) + per_call


def aten_parameters(gm: torch.fx.GraphModule, example_inputs: list, aten_inputs: int) -> list[bool]:
    """For each input of the ATen graph: whether it is a module's parameter (a weight, not a buffer).
    aot_autograd lifts the state Dynamo's graph holds itself first, its parameters before its buffers."""
    own = [True] * len(dict(gm.named_parameters(remove_duplicate=False)))
    own += [False] * (aten_inputs - len(example_inputs) - len(own))
    return own + [isinstance(ex, torch.nn.Parameter) for ex in example_inputs]


Transfer = tuple[str, str, int, int, str]


def step_transfers(graph: Graph, per_call: list[str | None]) -> list[Transfer]:
    """(direction, tensor, bytes, input or output index, what it is): per-call inputs into the card, in
    input order, then outputs the cards computed (a kernel's, or a collective's) back to the host, each
    root once."""
    fresh = {v: i for i, (v, p) in enumerate(zip(graph.inputs, per_call, strict=True)) if p and isinstance(v, Value)}
    ins = [("h2d", t.name, math.prod(t.dshape) * DTYPE_BYTES[t.dtype], fresh[t.value.root],
            per_call[fresh[t.value.root]]) for t in graph.tensors.values() if t.upload and t.value.root in fresh]
    on_card = {v for n in graph.nodes if n.host == "collective" for v in n.outputs}  # combined on the cards
    outs: list[Transfer] = []
    seen: set[Value] = set()
    for i, v in enumerate(graph.outputs):
        root = v.root if isinstance(v, Value) else None
        if root is not None and (root.dshape is not None or root in on_card) and root not in seen:
            seen.add(root)
            outs.append(("d2h", root.name, math.prod(root.shape) * (root.carrier or root.dtype).itemsize, i,
                         f"output {i}"))
    return sorted(ins, key=lambda t: t[3]) + outs
