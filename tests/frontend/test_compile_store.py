"""The passes' result in the result cache (frontend/compile_store.py): a hit gives the miss's outputs and
report, bound to the new ATen graph; the key changes with everything the passes read."""

from __future__ import annotations

import dataclasses
import json
import warnings

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from spyre_emu.frontend import backend, compile_store, last_report  # noqa: E402
from spyre_emu.frontend.options import parse_options  # noqa: E402

from spyre_emu import memo  # noqa: E402
from spyre_emu.config import load_machine  # noqa: E402
from tests.frontend import models  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "1")
    monkeypatch.setenv("SPYRE_EMU_CACHE", str(tmp_path))
    memo.clear_memory()
    yield tmp_path
    memo.clear_memory()


class _Layer(torch.nn.Module):
    """A decoder layer (constants: the norms' eps, the attention's scale) and a CPU fallback (cumsum)."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layer = models.LlamaLayer(64, 4, 2, 128).half()

    def forward(self, x, cos, sin):
        out, _, _ = self.layer(x, cos, sin)
        return torch.cumsum(out, -1) * 0.5


def _inputs():
    cos, sin = models.rope(8, 16)
    return models.seeded_input(1, 8, 64).half(), cos, sin


def _compile(monkeypatch, model, inputs, options=None):
    """A fresh Dynamo and an empty in-memory cache (a hit comes from disk): the outputs, the report,
    the warnings, the graphs ``compile_graph`` compiled, and the compiled graph."""
    torch._dynamo.reset()
    memo.clear_memory()
    graphs, compiled, compile_graph = [], [], backend.compile_graph
    monkeypatch.setattr(backend, "compile_graph", lambda gm, *a: graphs.append(gm) or compile_graph(gm, *a))
    load = compile_store.load
    monkeypatch.setattr(compile_store, "load",
                        lambda k, gm, o: compiled.append((gm, load(k, gm, o))) or compiled[-1][1])
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        out = torch.compile(model, backend="spyre_emu", dynamic=False, options=options)(*inputs)
    return out, last_report(), [str(w.message) for w in caught if "spyre_emu" in str(w.message)], graphs, compiled


def _fields(rep) -> str:
    """Every field of the report as JSON, but the host steps' wall time on this machine."""
    data = {f.name: getattr(rep, f.name) for f in dataclasses.fields(rep)}
    data["fallbacks"] = [{**f, "measured_us": None} for f in data["fallbacks"]]
    return json.dumps(data, sort_keys=True, default=lambda o: o.tolist() if isinstance(o, np.ndarray) else repr(o))


def test_a_stored_compile_gives_the_fresh_compile_s_outputs_and_report(cache_dir, monkeypatch):
    """The second compile of the same model in a fresh Dynamo reads the passes' result instead of running
    them, and its functional call gives the same outputs bit for bit, the same report and the same
    fallback warning; the host steps it runs and the lines it quotes are the new ATen graph's nodes."""
    model, inputs = _Layer(), _inputs()
    out, rep, warned, graphs, loaded = _compile(monkeypatch, model, inputs)
    assert len(graphs) == 1  # a miss: compiled, then stored
    assert loaded[0][1] is None
    again, rep2, warned2, graphs2, loaded2 = _compile(monkeypatch, model, inputs)
    assert graphs2 == []  # a hit: no passes
    assert loaded2[0][1] is not None
    assert torch.equal(out, again)
    assert _fields(rep) == _fields(rep2)
    assert rep.fallbacks
    assert "test_compile_store.py" in rep2.fallbacks[0]["source"]
    assert warned == warned2 != []
    gm, compiled = loaded2[0]
    fx = [n.fx for n in compiled.graph.nodes if n.fx is not None]
    assert fx
    owned = {n for _, sub in gm.named_modules() if isinstance(sub, torch.fx.GraphModule) for n in sub.graph.nodes}
    assert set(fx) <= owned  # bound to the graph compiled now, not the stored one's
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    off, rep3, _, graphs3, _ = _compile(monkeypatch, model, inputs)
    assert len(graphs3) == 1
    assert torch.equal(out, off)
    assert _fields(rep3) == _fields(rep)


def test_an_entry_that_does_not_read_back_is_a_miss(cache_dir, monkeypatch):
    model, inputs = _Layer(), _inputs()
    _compile(monkeypatch, model, inputs)
    stored = [p for p in (cache_dir / "results").rglob("*.pkl") if isinstance(memo.lookup(p.stem), bytes)]
    assert len(stored) == 1
    memo.store(stored[0].stem, b"not a pickle")
    out, _, _, graphs, loaded = _compile(monkeypatch, model, inputs)
    assert loaded[0][1] is None
    assert len(graphs) == 1  # compiled again, and stored again
    assert isinstance(memo.lookup(stored[0].stem), bytes)
    assert memo.lookup(stored[0].stem) != b"not a pickle"


def _traced(monkeypatch, model, inputs):
    """The ATen graph the backend hands to ``compile_graph``."""
    _, _, _, graphs, _ = _compile(monkeypatch, model, inputs)
    return graphs[0]


def test_the_key_changes_with_what_the_passes_read(cache_dir, monkeypatch):
    model, inputs = _Layer(), _inputs()
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")  # compile every time, to get the graph
    gm = _traced(monkeypatch, model, inputs)
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "1")
    opts, machine = parse_options(None), load_machine()
    params = [False] * sum(n.op == "placeholder" for n in gm.graph.nodes)
    key = compile_store.key(gm, opts, machine, params)
    assert key is not None
    assert key == compile_store.key(gm, opts, machine, params)
    assert compile_store.key(gm, parse_options({"cores": 8}), machine, params) != key
    assert compile_store.key(gm, opts, load_machine(None, ["dram.channels=4"]), params) != key
    assert compile_store.key(gm, opts, machine, [True] + params[1:]) != key
    assert compile_store.key(gm, parse_options({"cache": False}), machine, params) is None
    mul = next(n for n in gm.graph.nodes if n.target is torch.ops.aten.mul.Tensor and 0.5 in n.args)
    mul.args = (mul.args[0], 0.25)  # an argument
    assert compile_store.key(gm, opts, machine, params) not in (key, None)
    mul.args = (mul.args[0], 0.5)
    assert compile_store.key(gm, opts, machine, params) == key
    mul.meta["stack_trace"] = "elsewhere"  # the source line the report quotes
    assert compile_store.key(gm, opts, machine, params) not in (key, None)
    mul.meta["val"] = mul.meta["val"].transpose(-1, -2)  # the value's layout
    assert compile_store.key(gm, opts, machine, params) not in (key, None)
    mul.args = (mul.args[0], object())  # nothing the key can spell: no key, compiled as before
    assert compile_store.key(gm, opts, machine, params) is None


def test_a_constant_s_data_is_in_the_key(cache_dir, monkeypatch):
    gm = torch.fx.symbolic_trace(lambda x: x + 1)
    gm.register_buffer("c", torch.ones(4))
    with gm.graph.inserting_before(next(iter(gm.graph.nodes)).next):
        gm.graph.get_attr("c")
    gm.recompile()
    opts, machine = parse_options(None), load_machine()
    key = compile_store.key(gm, opts, machine, [False])
    gm.c[2] = 3.0
    assert compile_store.key(gm, opts, machine, [False]) not in (key, None)
    gm.c = torch.ones(4).to_sparse()  # no bytes to hash: no key
    assert compile_store.key(gm, opts, machine, [False]) is None


@pytest.mark.parametrize("t", [torch.tensor(0.125, dtype=torch.float16),
                               torch.arange(6, dtype=torch.bfloat16).view(2, 3), torch.tensor([True, False]),
                               torch.arange(5), torch.empty(0, 3), torch.tensor(-2.5)])
def test_a_constant_tensor_round_trips(t):
    fn, args = compile_store._reduce_tensor(t)
    back = fn(*args)
    assert (type(back), back.dtype, back.shape, back.stride(), back.device) == (
        torch.Tensor, t.dtype, t.shape, t.stride(), t.device)
    assert torch.equal(back, t)


def test_a_view_or_a_tensor_needing_gradients_is_pickled_by_torch():
    base = torch.arange(12.0)
    for t in (base[2:5], base.view(3, 4).t(), torch.ones(2, requires_grad=True)):
        fn, _ = compile_store._reduce_tensor(t)[:2]
        assert fn is not compile_store._tensor
