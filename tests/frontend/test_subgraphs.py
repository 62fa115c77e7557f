"""A layer marked as a nested compile region: captured once by torch, simulated as the unwrapped model."""

from __future__ import annotations

import json
import operator

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import aten_to_kernels, backend, last_report, subgraphs  # noqa: E402
from spyre_emu.frontend.compile import compile_graph  # noqa: E402

from tests.frontend import models  # noqa: E402

pytestmark = pytest.mark.torch
DIM, HEADS, KV_HEADS, HIDDEN = 128, 4, 2, 256
INVOKE = torch.ops.higher_order.invoke_subgraph


class _Region(models.LlamaLayer):
    forward = torch.compiler.nested_compile_region(models.LlamaLayer.forward)


class _Decoder(torch.nn.Module):
    """Layers of one class, then a norm; each layer's keys and values unread (the region's outputs
    nobody uses, which the expansion must drop as Dynamo drops them from the unwrapped graph)."""

    def __init__(self, layer: type, count: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(layer(DIM, HEADS, KV_HEADS, HIDDEN) for _ in range(count))
        self.norm = models.RMSNorm(DIM)

    def forward(self, x, cos, sin, *cache):
        for i, layer in enumerate(self.layers):
            x, _, _ = layer(x, cos, sin, *cache[2 * i:2 * i + 2])
        return self.norm(x)


class _DecoderKV(_Decoder):
    """The same layers returning every layer's keys and values too: no output of the region unread."""

    def forward(self, x, cos, sin, *cache):
        kv = []
        for i, layer in enumerate(self.layers):
            x, k, v = layer(x, cos, sin, *cache[2 * i:2 * i + 2])
            kv += [k, v]
        return self.norm(x), *kv


def _count_regions(monkeypatch) -> list[int]:
    """The number of ``invoke_subgraph`` calls each ATen graph reached the passes with, and whether
    they were read in place (walked) or copied (expanded)."""
    counts = []
    real = backend.walkable

    def spy(gm):
        walk = real(gm)
        counts.append((sum(n.target is INVOKE for n in gm.graph.nodes), "walked" if walk else "expanded"))
        return walk
    monkeypatch.setattr(backend, "walkable", spy)
    return counts


def test_a_wrapped_layer_matches_eager(check, monkeypatch):
    counts = _count_regions(monkeypatch)
    model = models.seeded(_Decoder, _Region, 3)
    cos, sin = models.rope(8, DIM // HEADS)
    check(model, models.seeded_input(1, 8, DIM), cos, sin)
    assert counts == [(3, "walked")]  # torch captured the layer as a region, called three times


def _decode_report(layer: type, layers: int, decoder: type = _Decoder) -> dict:
    """A decode step's report (KV cache of 64) of the model on meta tensors: timing only."""
    torch._dynamo.reset()
    with torch.device("meta"):
        model = decoder(layer, layers).half().eval()
        cos, sin = models.rope(1, DIM // HEADS, start=64, device="meta")
        cache = [torch.empty(1, KV_HEADS, 64, DIM // HEADS).half() for _ in range(2 * layers)]
        x = torch.empty(1, 1, DIM).half()
    with torch.no_grad():
        torch.compile(model, backend="spyre_emu", dynamic=False)(x, cos, sin, *cache)
    return last_report()


@pytest.mark.parametrize(("decoder", "how"), [(_Decoder, "expanded"), (_DecoderKV, "walked")])
def test_a_wrapped_layer_simulates_as_the_unwrapped_model(monkeypatch, decoder, how):
    counts = _count_regions(monkeypatch)
    wrapped = _decode_report(_Region, 3, decoder)
    assert counts == [(3, how)]  # unread keys and values: the body's dead nodes, dropped by the expansion
    plain = _decode_report(models.LlamaLayer, 3, decoder)
    assert counts == [(3, how), (0, "expanded")]  # no region (nothing to expand either)
    assert wrapped.total_cycles == plain.total_cycles
    assert [json.dumps(p, sort_keys=True) for p in wrapped.kernel_programs] == \
        [json.dumps(p, sort_keys=True) for p in plain.kernel_programs]
    assert [k["op"] for k in wrapped.kernels] == [k["op"] for k in plain.kernels]


class _Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = torch.tensor([2.0, -1.0, 0.5])  # a plain tensor attribute: a get_attr in the subgraph

    def forward(self, x):
        return (x * self.scale + 1.0,)


def _called_twice(read_first: bool = False) -> torch.fx.GraphModule:
    """A graph calling one region twice, the second on the first's output; ``read_first``: it returns only
    the first call's result (the second's copy then dead)."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    sub = graph.get_attr("region")
    results = []
    for _ in range(2):
        x = graph.call_function(operator.getitem, (graph.call_function(INVOKE, (sub, "region", x)), 0))
        results.append(x)
    graph.output((results[0] if read_first else x,))
    root = torch.nn.Module()
    root.region = torch.fx.symbolic_trace(_Scaled())
    return torch.fx.GraphModule(root, graph)


def test_the_expansion_gives_each_call_the_region_and_its_constants():
    gm = _called_twice()
    body = gm.region
    assert subgraphs.walkable(gm)
    assert not subgraphs.walkable(_called_twice(read_first=True))
    x = torch.randn(4, 3)
    want = gm(x)
    assert subgraphs.inline_subgraphs(gm)
    ops = [n.op for n in gm.graph.nodes]
    assert INVOKE not in [n.target for n in gm.graph.nodes]
    assert ops.count("get_attr") == 2  # one constant node per call, as each unwrapped layer has its own
    assert not hasattr(gm, "region")
    torch.testing.assert_close(gm(x), want)
    torch.testing.assert_close(want[0], (x * body.scale + 1.0) * body.scale + 1.0)


class _Writes(torch.nn.Module):
    """A layer that writes a tensor in place: its graph goes through aot_autograd, not the single trace."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(DIM, DIM, bias=False)

    def forward(self, x):
        y = self.lin(x)
        y[:, 0] = 0.0
        return torch.relu(y)


class _WritesRegion(_Writes):
    forward = torch.compiler.nested_compile_region(_Writes.forward)


class _Stack(torch.nn.Module):
    def __init__(self, layer: type):
        super().__init__()
        self.layers = torch.nn.ModuleList(layer() for _ in range(3))

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x


def test_a_region_through_aot_autograd_matches_eager_and_the_unwrapped_cycles(check, monkeypatch):
    counts = _count_regions(monkeypatch)
    x = models.seeded_input(16, DIM)
    check(models.seeded(_Stack, _WritesRegion), x)
    wrapped = last_report().total_cycles
    torch._dynamo.reset()
    check(models.seeded(_Stack, _Writes), x)
    assert [n for n, _ in counts] == [3, 0]  # aot_autograd's graph called the region three times, then none
    assert last_report().total_cycles == wrapped


def _summary(graph) -> list[tuple]:
    """Every decision of pass 1 on every node, values by name: what the later passes start from."""
    def name(v):
        return (v.name, v.shape, str(v.dtype), v.carrier, None if v.const is None else v.const.tolist()) \
            if isinstance(v, aten_to_kernels.Value) else repr(v)

    def attr(a):
        return torch.fx.node.map_aggregate(a, lambda v: name(v) if isinstance(v, aten_to_kernels.Value) else
                                           (str(v) if isinstance(v, torch.fx.Node) else v))
    return [(n.op, n.host, n.reason, [name(v) for v in n.inputs], [name(v) for v in n.outputs],
             sorted((k, repr(attr(a))) for k, a in n.attrs.items()), getattr(n.fx, "target", None))
            for n in graph.nodes] + [("inputs", [name(v) for v in graph.inputs]),
                                     ("outputs", [name(v) for v in graph.outputs])]


def test_walking_a_region_in_place_builds_the_graph_its_expansion_builds(monkeypatch):
    """The proof of the walk: on a graph ``walkable`` accepts, pass 1 over the regions read in place gives
    the graph, node for node and value for value (names, shapes, constants, attributes), that it gives
    over the expanded graph; every later pass starts from that graph. Constants in the body included."""
    seen = []
    monkeypatch.setattr(backend, "compile_graph", lambda gm, *a: seen.append(gm) or compile_graph(gm, *a))
    _decode_report(_Region, 3, _DecoderKV)
    gm, = seen
    assert subgraphs.walkable(gm)
    assert sum(n.target is INVOKE for n in gm.graph.nodes) == 3
    walked = _summary(aten_to_kernels.build_graph(gm))
    subgraphs.inline_subgraphs(gm)
    assert INVOKE not in [n.target for n in gm.graph.nodes]
    assert walked == _summary(aten_to_kernels.build_graph(gm))
    assert len(walked) > 3 * 30


class _ScaledRegion(_Scaled):
    forward = torch.compiler.nested_compile_region(_Scaled.forward)


class _ScaledStack(torch.nn.Module):
    def __init__(self, layer: type):
        super().__init__()
        self.layers = torch.nn.ModuleList(layer() for _ in range(3))

    def forward(self, x):
        outs = []
        for layer in self.layers:
            x, = layer(x)
            outs.append(x)
        return tuple(outs)


def test_a_walked_region_with_a_constant_matches_eager_and_its_expansion(check, monkeypatch):
    counts = _count_regions(monkeypatch)
    x = models.seeded_input(4, 3)
    check(models.seeded(_ScaledStack, _ScaledRegion), x)
    walked = last_report()
    torch._dynamo.reset()
    monkeypatch.setattr(backend, "walkable", lambda gm: False)
    check(models.seeded(_ScaledStack, _ScaledRegion), x)
    (calls, how), = counts
    assert calls >= 2
    assert how == "walked"
    assert last_report().total_cycles == walked.total_cycles
    assert [json.dumps(p, sort_keys=True) for p in last_report().kernel_programs] == \
        [json.dumps(p, sort_keys=True) for p in walked.kernel_programs]
