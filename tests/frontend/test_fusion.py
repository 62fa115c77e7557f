"""Composite ops written in primitives become one kernel each, and still match eager."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import fusion, last_report  # noqa: E402
from spyre_emu.frontend.aten_to_kernels import build_graph  # noqa: E402
from spyre_emu.frontend.decompositions import decompositions, rewrite_attention  # noqa: E402
from spyre_emu.frontend.graph import Node  # noqa: E402
from spyre_emu.frontend.trace import trace_inference  # noqa: E402

from tests.frontend import models  # noqa: E402

pytestmark = pytest.mark.torch


def _x(*shape):
    torch.manual_seed(len(shape))
    return torch.randn(*shape).half()


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def gelu_new(x):  # GPT-2's GELU
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def silu(x):
    return x * torch.sigmoid(x)


def softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize(("fn", "op", "shapes"), [
    (rms_norm, "rmsnorm", [(6, 128), (128,)]), (gelu_new, "gelufwd", [(6, 128)]), (silu, "silu", [(6, 128)]),
    (softmax, "softmax", [(6, 100)]), (lambda x: torch.softmax(x, -1), "softmax", [(2, 3, 64)]),
    (lambda x, w, b: torch.nn.functional.layer_norm(x, (96,), w, b), "layernorm", [(5, 96), (96,), (96,)]),
], ids=["rmsnorm", "gelu_new", "silu", "softmax_manual", "softmax", "layernorm"])
def test_fused_into_one_kernel(check, fn, op, shapes):
    check(fn, *(_x(*s) for s in shapes))
    assert [k["op"] for k in last_report().kernels] == [op]


def test_a_shared_intermediate_is_not_fused_away(check):
    def fn(x):
        s = torch.sigmoid(x)
        return x * s + s  # the sigmoid is read twice: it must stay
    check(fn, _x(4, 64))
    assert "sigmoid" in [k["op"] for k in last_report().kernels]


def _full_sweep_fuse(graph):
    """The fusion with every kernel nothing reads found by a scan of the whole graph after each
    fusion: what ``fuse`` must equal (it only follows the inputs a fusion stopped reading)."""
    for pattern in fusion.PATTERNS:
        at, chains = 0, fusion._Chains(graph)
        while at < len(graph.nodes):
            node = graph.nodes[at]
            found = pattern(chains, node) if node.is_kernel else None
            if found is not None:
                fused = Node(found[0], found[1], node.outputs, node.fx, found[2])
                graph.nodes[at] = fused
                fused.unfused = [*fusion._drop_unread(graph), node]
                at, chains = graph.nodes.index(fused), fusion._Chains(graph)
            at += 1


def test_fusion_drops_what_a_full_sweep_drops():
    """Two decoder layers (norms, softmax, SiLU, residuals, a shared intermediate): the same kernels,
    inputs, outputs and unfused chains as with a scan of the whole graph after every fusion."""
    def signature(graph):
        return [(n.op, [v.name for v in n.inputs], [v.name for v in n.outputs],
                 [(u.op, [v.name for v in u.outputs]) for u in n.unfused]) for n in graph.nodes]

    seen = []

    def backend(gm, example_inputs):
        rewrite_attention(gm)
        aten = trace_inference(gm, example_inputs, decompositions())
        ours, full = build_graph(aten), build_graph(aten)
        fusion.fuse(ours)
        _full_sweep_fuse(full)
        seen.append((signature(ours), signature(full)))
        return gm.forward

    llama = models.seeded(models.LlamaLayer, 64, 4, 2, 128)
    gpt2 = models.seeded(models.GPT2Block, 64, 4)
    cos, sin = models.rope(8, 16)

    def two_layers(x):
        return gpt2(llama(x, cos, sin)[0]) + silu(x)
    with torch.no_grad():
        torch.compile(two_layers, backend=backend, dynamic=False)(_x(1, 8, 64))
    assert seen
    assert all(ours == full for ours, full in seen)
    fused = {n[0] for n in seen[0][0] if n[3]}
    assert {"rmsnorm", "softmax", "silu", "gelufwd"} <= fused, fused
