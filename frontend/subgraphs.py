"""Repeated regions (``torch.compiler.nested_compile_region``) captured once, expanded for the passes.

A model whose decoder layer is marked as a nested compile region reaches the backend with one
``invoke_subgraph`` call per layer, all calling the same subgraph: Dynamo traces the layer's
bytecode once and stamps the graph out for the other calls, and the ATen trace (trace.py, or
aot_autograd) traces that subgraph once too, keyed by its identifier. That is where torch's time
goes (docs/speed.md), so the region saves it.

The passes still see every layer: each call is replaced here by a copy of the subgraph's ATen
nodes, wired to the call's operands (its layer's weights and cache) and to the users of its
outputs. So the front end gets the same ATen graph, op for op, as the unwrapped model, and every
decision it makes across a layer's boundary (fusing the residual add into the next layer's norm,
keeping a value in LX from one layer to the next, where a launch starts) is the one it makes for
the unwrapped model: the simulated cycles are equal, not close. What crosses the boundary is only
tensors, and the copy hands each one over as the call did. The layers' kernel programs are still
lowered and simulated once: the 40 layers' launches are the same programs by text, which
``compile_graph`` lowers once and ``pipeline.timings`` simulates once (docs/frontend.md).
"""

from __future__ import annotations

import operator

import torch

INVOKE_SUBGRAPH = torch.ops.higher_order.invoke_subgraph


def inline_subgraphs(gm: torch.fx.GraphModule) -> bool:
    """Replace every ``invoke_subgraph`` call of ``gm`` by the subgraph's nodes; whether there was one."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is INVOKE_SUBGRAPH]
    expanded: dict[str, dict[str, str]] = {}  # subgraph -> its constants' names in gm
    for call in calls:
        body, _, *operands = call.args
        sub = getattr(gm, body.target)
        if body.target not in expanded:  # a region nested in the region: expanded once, in the shared subgraph
            inline_subgraphs(sub)
            expanded[body.target] = _constants(gm, sub, body.target)
        _expand(gm.graph, call, sub.graph, operands, expanded[body.target])
    for name in expanded:
        for user in [n for n in gm.graph.nodes if n.op == "get_attr" and n.target == name]:
            gm.graph.erase_node(user)
        delattr(gm, name)
    if calls:  # outputs of the region no call reads: Dynamo drops them from an unwrapped model's graph
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return bool(calls)


def walkable(gm: torch.fx.GraphModule) -> bool:
    """Whether the passes may read each call's region in place (``region``, aten_to_kernels.py) instead
    of a copy: where the copy would be exactly the body's nodes, none dropped. That holds when no node
    of ``gm`` or of a body is dead (every one but the outputs, a body's placeholders included, has a
    user: then every copied node has one too, and the graph-wide ``eliminate_dead_code`` after the
    expansion removes nothing), every call reads each output of its body through an index, no body
    output is one of its inputs or constants, and no body calls a region itself (a nested region's
    constants would be placed differently). Elsewhere the graph is expanded as before."""
    calls = [n for n in gm.graph.nodes if n.op == "call_function" and n.target is INVOKE_SUBGRAPH]
    if not calls or any(not n.users for n in gm.graph.nodes if n.op not in ("placeholder", "output")):
        return False
    for call in calls:
        outs = _outputs(getattr(gm, call.args[0].target))
        if any(u.target is not operator.getitem for u in call.users) or \
                {u.args[1] for u in call.users} != set(range(len(outs))):
            return False
    return all(_plain(getattr(gm, name)) for name in {call.args[0].target for call in calls})


def _plain(sub: torch.fx.GraphModule) -> bool:
    nodes = list(sub.graph.nodes)
    return (all(n.users for n in nodes if n.op != "output")
            and not any(n.op == "call_function" and n.target is INVOKE_SUBGRAPH for n in nodes)
            and all(isinstance(o, torch.fx.Node) and o.op == "call_function" for o in _outputs(sub)))


def _outputs(sub: torch.fx.GraphModule) -> list:
    out = next(n for n in reversed(sub.graph.nodes) if n.op == "output")
    return list(out.args[0]) if isinstance(out.args[0], (tuple, list)) else [out.args[0]]


def region(gm: torch.fx.GraphModule, call: torch.fx.Node) -> tuple[torch.fx.GraphModule, list, list, list]:
    """What a call of a ``walkable`` graph runs: its subgraph, the (placeholder, operand) pairs, the body's
    nodes in the order ``_expand`` puts their copies (constants first, then the rest as in the body) and
    the body's outputs."""
    body, _, *operands = call.args
    sub = getattr(gm, body.target)
    nodes = list(sub.graph.nodes)
    places = [n for n in nodes if n.op == "placeholder"]
    steps = [n for n in nodes if n.op == "get_attr"] + [n for n in nodes if n.op not in ("placeholder", "get_attr",
                                                                                         "output")]
    return sub, list(zip(places, operands, strict=True)), steps, _outputs(sub)


def _constants(gm: torch.fx.GraphModule, sub: torch.fx.GraphModule, prefix: str) -> dict[str, str]:
    """The tensors the subgraph holds (constants its trace made), set on ``gm`` under fresh names."""
    names = {}
    for node in sub.graph.nodes:
        if node.op == "get_attr" and node.target not in names:
            name = f"{prefix}_{node.target.replace('.', '_')}"
            while hasattr(gm, name):
                name += "_"
            setattr(gm, name, operator.attrgetter(node.target)(sub))
            names[node.target] = name
    return names


def _expand(graph: torch.fx.Graph, call: torch.fx.Node, body: torch.fx.Graph, operands: list,
            constants: dict[str, str]) -> None:
    """The call's copy of the body: each call reads its own node of each constant, as each layer of
    the unwrapped model has its own."""
    places = [n for n in body.nodes if n.op == "placeholder"]
    values: dict[torch.fx.Node, object] = dict(zip(places, operands, strict=True))
    with graph.inserting_before(call):
        for node in body.nodes:
            if node.op == "get_attr":
                values[node] = graph.get_attr(constants[node.target])
                values[node].meta = dict(node.meta)
        outputs = graph.graph_copy(body, values)
    for user in list(call.users):
        if user.op != "call_function" or user.target is not operator.getitem:
            raise AssertionError(f"invoke_subgraph output used by {user.format_node()}, not by an index")
        user.replace_all_uses_with(outputs[user.args[1]])
        graph.erase_node(user)
    graph.erase_node(call)
