"""A layer marked as a nested compile region: captured once by torch, simulated as the unwrapped model."""

from __future__ import annotations

import json
import operator

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import backend, last_report, subgraphs, trace  # noqa: E402

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


def _count_regions(monkeypatch) -> list[int]:
    """The number of ``invoke_subgraph`` calls each ATen trace expanded."""
    counts = []
    real = trace.inline_subgraphs

    def spy(gm):
        counts.append(sum(n.target is torch.ops.higher_order.invoke_subgraph for n in gm.graph.nodes))
        return real(gm)
    monkeypatch.setattr(trace, "inline_subgraphs", spy)
    return counts


def test_a_wrapped_layer_matches_eager(check, monkeypatch):
    counts = _count_regions(monkeypatch)
    model = models.seeded(_Decoder, _Region, 3)
    cos, sin = models.rope(8, DIM // HEADS)
    check(model, models.seeded_input(1, 8, DIM), cos, sin)
    assert counts == [3]  # torch captured the layer as a region, called three times


def _decode_report(layer: type, layers: int) -> dict:
    """A decode step's report (KV cache of 64) of the model on meta tensors: timing only."""
    torch._dynamo.reset()
    with torch.device("meta"):
        model = _Decoder(layer, layers).half().eval()
        cos, sin = models.rope(1, DIM // HEADS, start=64, device="meta")
        cache = [torch.empty(1, KV_HEADS, 64, DIM // HEADS).half() for _ in range(2 * layers)]
        x = torch.empty(1, 1, DIM).half()
    with torch.no_grad():
        torch.compile(model, backend="spyre_emu", dynamic=False)(x, cos, sin, *cache)
    return last_report()


def test_a_wrapped_layer_simulates_as_the_unwrapped_model(monkeypatch):
    counts = _count_regions(monkeypatch)
    wrapped = _decode_report(_Region, 3)
    assert counts == [3]
    plain = _decode_report(models.LlamaLayer, 3)
    assert counts == [3, 0]
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


def test_the_expansion_gives_each_call_the_region_and_its_constants():
    body = torch.fx.symbolic_trace(_Scaled())
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    sub = graph.get_attr("region")
    for _ in range(2):  # the region called twice, the second on the first's output
        x = graph.call_function(operator.getitem, (graph.call_function(INVOKE, (sub, "region", x)), 0))
    graph.output((x,))
    root = torch.nn.Module()
    root.region = body
    gm = torch.fx.GraphModule(root, graph)
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
    counts = []
    real = backend.inline_subgraphs
    monkeypatch.setattr(backend, "inline_subgraphs", lambda gm: counts.append(
        sum(n.target is INVOKE for n in gm.graph.nodes)) or real(gm))
    x = models.seeded_input(16, DIM)
    check(models.seeded(_Stack, _WritesRegion), x)
    wrapped = last_report().total_cycles
    torch._dynamo.reset()
    check(models.seeded(_Stack, _Writes), x)
    assert counts == [3, 0]  # aot_autograd's graph called the region three times, then none
    assert last_report().total_cycles == wrapped
