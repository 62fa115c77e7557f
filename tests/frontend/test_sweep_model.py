"""A sweep over a torch model (spyre_emu.frontend.sweep.ModelTask): each point is one compiled call."""

from __future__ import annotations

import pytest
import torch
from spyre_emu.frontend import last_report
from spyre_emu.frontend.sweep import ModelTask

from spyre_emu.errors import ConfigError
from spyre_emu.sweep import grid_search, load_spec, sweep
from tests.frontend import models

FACTORY = "tests.frontend.test_sweep_model:swiglu"


def swiglu(hidden: int = 256, tokens: int = 8):
    """A SwiGLU MLP on meta tensors: timing only, nothing allocated."""
    with torch.device("meta"):
        model = models.SwiGLU(128, hidden).half().eval()
    return model, (torch.randn(1, tokens, 128, device="meta").half(),)


def test_each_point_is_the_report_of_one_compiled_call():
    table = sweep({"model.hidden": grid_search([256, 512]), "options.cores": grid_search([8])}, ModelTask(FACTORY),
                  workers=1, cache=False).table
    rows = table.records()
    model, inputs = swiglu(512)
    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(model, backend="spyre_emu", dynamic=False, options={"functional": False, "cores": 8})(*inputs)
    want = last_report()
    assert (rows[1]["cycles"], rows[1]["kernels"], rows[1]["error"]) == (want.total_cycles, len(want.kernels), "")
    assert rows[0]["cycles"] < rows[1]["cycles"]
    assert rows[1]["fallbacks"] == 0


def test_machine_keys_reach_the_backend():
    table = sweep({"ring.hop_latency_cycles": grid_search([2, 40])}, ModelTask(FACTORY), workers=1, cache=False).table
    fast, slow = table.column("cycles")
    assert slow > fast


@pytest.mark.parametrize(("space", "message"), [
    ({"model.width": grid_search([1])}, "space.model.width: the model factory"),
    ({"options.cores": grid_search([0])}, "space.options.cores: must be a positive number of cores, got 0"),
    ({"options.functional": grid_search([True])}, "space.options.functional: a sweep sets options.functional"),
    ({"layers": grid_search([1])}, "space.layers: unknown parameter"),
])
def test_bad_model_spaces_are_one_line_errors(space, message):
    with pytest.raises(ConfigError) as err:
        sweep(space, ModelTask(FACTORY), workers=1, cache=False)
    assert str(err.value).startswith(message)


def test_a_spec_names_the_task_class(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(f'[task]\nkind = "spyre_emu.frontend.sweep:ModelTask"\nfactory = "{FACTORY}"\n'
                    '[space]\nmodel.hidden = {grid_search = [256]}\n')
    assert load_spec(spec).task == ModelTask(FACTORY)
    spec.write_text('[task]\nkind = "spyre_emu.frontend.sweep:ModelTask"\n[space]\nx = 1\n')
    with pytest.raises(ConfigError, match=r"task: a spyre_emu.frontend.sweep:ModelTask task needs factory = \.\.\."):
        load_spec(spec)
    spec.write_text('[task]\nkind = "spyre_emu.sweep:sweep"\n[space]\nx = 1\n')
    with pytest.raises(ConfigError, match="task.kind: unknown task kind 'spyre_emu.sweep:sweep'"):
        load_spec(spec)
