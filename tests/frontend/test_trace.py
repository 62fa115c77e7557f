"""The single ATen trace (frontend/trace.py) gives aot_autograd's graph, and leaves mutating graphs to it."""

from __future__ import annotations

import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spyre_emu.frontend.decompositions import decompositions, rewrite_attention  # noqa: E402
from spyre_emu.frontend.graph import source_line  # noqa: E402
from spyre_emu.frontend.trace import _fake, trace_inference  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402
from torch._subclasses.fake_tensor import FakeTensorMode, unset_fake_temporarily  # noqa: E402

from tests.frontend import zoo  # noqa: E402

pytestmark = pytest.mark.torch


def _both_graphs(model, inputs: dict) -> list[tuple]:
    """Per Dynamo graph of the model's call: (single trace or None, aot_autograd's forward graph)."""
    graphs = []

    def backend(gm, example_inputs):
        rewrite_attention(gm)
        fast = trace_inference(gm, example_inputs, decompositions())
        caught = []

        def keep(aot_gm, _):
            caught.append(aot_gm)
            return aot_gm
        compiled = aot_autograd(fw_compiler=keep, decompositions=decompositions())(gm, example_inputs)
        graphs.append((fast, caught[0]))
        return compiled

    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.compile(model, backend=backend, dynamic=False)(**inputs)
    return graphs


# a decoder with RoPE, GQA and a KV cache; an encoder with an attention mask; convolutions and batch norm
@pytest.mark.parametrize("name", ["llama", "bert", "resnet18"])
def test_single_trace_is_aot_autograds_graph(name):
    graphs = _both_graphs(*zoo.build(name))
    assert graphs
    for fast, aot in graphs:
        assert fast is not None
        assert fast.code == aot.code  # same nodes, names, targets, arguments and outputs, in the same order
        calls = [n for n in fast.graph.nodes if n.op == "call_function"]
        assert all(source_line(n).startswith("File ") for n in calls[:5])  # the user's source lines are kept


@pytest.mark.parametrize("name", ["granitemoe", "t5"])  # x[i] = y (expert routing); x += y
def test_in_place_graphs_are_left_to_aot_autograd(name):
    assert all(fast is None for fast, _ in _both_graphs(*zoo.build(name)))


def test_the_decomposition_table_is_built_once_and_neither_trace_changes_it():
    """decompositions() is shared by every compile (functools.cache): both ways to the ATen graph copy it."""
    table = decompositions()
    before = dict(table)
    _both_graphs(*zoo.build("t5"))  # the single trace refused, then aot_autograd
    _both_graphs(*zoo.build("llama"))
    assert decompositions() is table
    assert table == before


@torch.fx.wrap
def _bump(x):
    x.add_(1)
    return x


def _traced(fn, x):
    """``fn`` as a graph whose input carries an example value, as Dynamo's do."""
    gm = torch.fx.symbolic_trace(fn)
    next(n for n in gm.graph.nodes if n.op == "placeholder").meta["example_value"] = x
    return gm


def test_a_mutation_the_dynamo_graph_hides_is_found_in_the_trace():
    """A write inside a called function shows only in the ATen trace: the trace is refused."""
    x = torch.randn(4, 8)
    assert trace_inference(_traced(lambda x: _bump(x) * 2, x), [x], decompositions()) is None
    assert trace_inference(_traced(lambda x: x * 2, x), [x], decompositions()) is not None


def test_a_model_writing_its_input_still_matches_eager(check):
    def bump(x, y):
        x.add_(y)
        return x * 2
    x, y = torch.randn(16, 64).half(), torch.randn(16, 64).half()
    x_eager = x.clone()
    want = bump(x_eager, y)
    with torch.no_grad():
        got = torch.compile(bump, backend="spyre_emu", dynamic=False)(x, y)
    torch.testing.assert_close(got, want, atol=5e-3, rtol=5e-3)
    torch.testing.assert_close(x, x_eager, atol=5e-3, rtol=5e-3)  # the input written as eager writes it


def test_a_fake_input_is_what_empty_strided_gives_under_the_fake_mode():
    """trace._fake builds an input that owns its storage without dispatching torch.empty_strided
    under the fake mode: it must be the same tensor as that call's (torch's ``constructors`` rule)."""
    mode = FakeTensorMode()

    def fields(x):
        return (type(x), x.shape, x.stride(), x.dtype, x.device, x.fake_device, x.storage_offset(), x.requires_grad,
                x.fake_mode, x.constant, x._is_view(), torch._C._dispatch_keys(x), x.untyped_storage().nbytes())

    for device in ("cpu", "meta"):
        for t in (torch.empty(3, 4, device=device), torch.empty_strided((3, 4, 2), (2, 6, 1), device=device),
                  torch.empty(5, dtype=torch.int64, device=device),
                  torch.nn.Parameter(torch.empty(4, 4, dtype=torch.float16, device=device))):
            with mode:
                made = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
            with unset_fake_temporarily():
                fake = _fake(mode, t)
            assert fields(fake) == fields(made)
