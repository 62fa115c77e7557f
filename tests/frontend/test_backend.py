"""The backend end to end: registration, a Linear + ReLU through functional simulation, options, errors."""

from __future__ import annotations

import gc
import json

import pytest

torch = pytest.importorskip("torch")

import numpy as np  # noqa: E402
from spyre_emu.frontend import backend, capture, export_program, last_report  # noqa: E402

from spyre_emu.cli import main  # noqa: E402
from spyre_emu.errors import SpyreEmuError  # noqa: E402

pytestmark = pytest.mark.torch


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU()).half()


def test_backend_is_registered_by_entry_point():
    assert "spyre_emu" in torch._dynamo.list_backends()


def test_linear_relu_matches_eager_and_reports(check):
    x = torch.randn(16, 64).half()
    check(_mlp(), x)
    rep = last_report()
    assert [k["op"] for k in rep.kernels] == ["batchmatmul", "add", "relufwd"]
    assert rep.total_cycles > 0
    assert (rep.fallbacks, rep.crossings) == ([], [])
    assert sum(k["share"] for k in rep.kernels) == pytest.approx(1.0, abs=0.01)
    assert "batchmatmul" in rep.to_text()


class _Generator(torch.nn.Module):
    """A module with a generate method that calls itself step by step, as Hugging Face's does."""

    def __init__(self):
        super().__init__()
        self.mlp = _mlp()

    def forward(self, x):
        return self.mlp(x)[:, :64]

    def generate(self, x, steps):
        for _ in range(steps):
            x = self(x)
        return x


def test_compiled_generate_runs_the_compiled_forward():
    """compiled.generate was the original module's method calling the eager module: no report."""
    model, x = _Generator(), torch.randn(16, 64).half()
    with torch.no_grad():
        want = model.generate(x, 2)
        with capture() as reports:
            got = torch.compile(model, backend="spyre_emu", dynamic=False).generate(x, 2)
        assert len(reports) == 2
        torch.testing.assert_close(got, want, atol=5e-3, rtol=5e-3)
        assert "forward" not in model.__dict__  # the module's own forward is back
        with capture() as reports:
            torch.compile(model, backend="eager").generate(x, 2)  # other backends: untouched
        assert reports == []


def test_a_new_shape_recompiles_static_without_dynamic_false():
    """Dynamo's automatic dynamic shapes turned the second shape into a dynamic graph, which is refused."""
    compiled = torch.compile(lambda x: x.exp(), backend="spyre_emu")
    with torch.no_grad(), capture() as reports:
        for rows in (4, 8, 16):
            compiled(torch.randn(rows, 64).half())
    assert len(reports) == 3


def test_timing_only_matches_functional_timing():
    model, x = _mlp(), torch.randn(16, 64).half()
    with torch.no_grad(), capture() as reports:
        torch.compile(model, backend="spyre_emu")(x)
        torch._dynamo.reset()
        y = torch.compile(model, backend="spyre_emu", options={"functional": False})(x)
    assert reports[0].total_cycles == reports[1].total_cycles
    torch.testing.assert_close(y, model(x))


def test_training_is_refused():
    model = _mlp().float()
    with pytest.raises(Exception, match="training is not simulated"):
        torch.compile(model, backend="spyre_emu")(torch.randn(4, 64))


@pytest.mark.parametrize(("options", "message"), [
    ({"fallback": "maybe"}, "options.fallback: must be one of cpu, error"),
    ({"cores": 0}, "options.cores: must be a positive number of cores"),
    ({"colour": 1}, "options.colour: unknown option"),
    ({"cores": 64}, "options.cores: the card has 32 cores"),
    ({"set": True}, "options.set: must be KEY=VALUE strings"),  # fuzz: a TypeError from tuple(True)
    ({"weights": "host"}, "options.weights: must be one of prepared, stored"),
])
def test_bad_options_are_one_line_errors(options, message):
    with pytest.raises(Exception, match=message) as info, torch.no_grad():
        torch.compile(_mlp(), backend="spyre_emu", options=options)(torch.randn(4, 64).half())
    assert isinstance(getattr(info.value, "inner_exception", info.value), SpyreEmuError)


def test_fewer_cores_take_longer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU()).half()
    x = torch.randn(256, 256).half()
    with torch.no_grad(), capture() as reports:
        torch.compile(model, backend="spyre_emu", options={"functional": False, "cores": 2})(x)
        torch._dynamo.reset()
        torch.compile(model, backend="spyre_emu", options={"functional": False})(x)
    assert reports[0].total_cycles > reports[1].total_cycles
    assert max(k["cores"] for k in reports[0].kernels) <= 2


def test_export_program_writes_every_graph_and_passes_keywords(tmp_path):
    """A graph break makes two graphs: both graphs' programs are written; keywords reach the call."""
    def fn(x, scale=1.0):
        y = (x * scale).exp()
        print("graph break")
        return y.tanh()

    paths = export_program(fn, (torch.randn(8, 64).half(),), tmp_path / "f.json", scale=2.0)
    ops = [[k["op"] for k in json.loads(p.read_text())["kernels"]] for p in paths]
    assert ops[0][-1] == "exp"
    assert ops[-1] == ["tanh"]


def test_export_program_runs_with_the_cli(tmp_path):
    model, x = _mlp(), torch.randn(16, 64).half()
    paths = export_program(model, (x,), tmp_path / "model.json")
    assert [p.name for p in paths] == ["model.json"] + [f"model.{i}.json" for i in range(1, len(paths))]
    for path in paths:  # one launch per file, each with the inputs it had in the call
        out_dir = tmp_path / path.stem
        assert main(["run", str(path), "--functional", "--output-dir", str(out_dir), "--quiet"]) == 0
    (out,) = [p for p in out_dir.glob("*.npy")]
    with torch.no_grad():
        torch.testing.assert_close(torch.from_numpy(np.load(out)), model(x), atol=5e-3, rtol=5e-3)


class _InPlace(torch.nn.Module):
    """Writes in place: the backend goes through aot_autograd (trace.py)."""

    def __init__(self):
        super().__init__()
        self.mlp = _mlp()

    def forward(self, x):
        y = self.mlp(x)
        y.mul_(2)
        return y


@pytest.mark.parametrize("model", [_mlp, _InPlace])
def test_the_trace_and_passes_run_with_the_collector_paused(monkeypatch, model):
    """memo.collector_paused around the backend's own work, either way to the ATen graph; the
    collector is left as it was."""
    seen, compile_graph = [], backend.compile_graph

    def recorded(*args, **kwargs):
        seen.append(gc.isenabled())
        return compile_graph(*args, **kwargs)
    monkeypatch.setattr(backend, "compile_graph", recorded)
    traces, trace = [], backend.trace_inference
    monkeypatch.setattr(backend, "trace_inference", lambda *a: traces.append(trace(*a)) or traces[-1])
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model(), backend="spyre_emu", dynamic=False)(torch.randn(16, 64).half())
    assert seen == [False]
    assert gc.isenabled()
    assert [t is None for t in traces] == [model is _InPlace]  # the single trace, or aot_autograd
