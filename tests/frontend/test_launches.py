"""Launches: kernels handing over through DRAM are separate kernel programs, identical layers one program."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

from spyre_emu import pipeline  # noqa: E402
from spyre_emu.config import load_machine  # noqa: E402

pytestmark = pytest.mark.torch


def test_a_dram_hand_over_starts_a_launch(check):
    check(lambda a, b: torch.mm(a, b).exp(), torch.randn(64, 128).half() / 8, torch.randn(128, 64).half() / 8)
    rep = last_report()
    first, second = rep.kernel_programs
    assert [k["op"] for k in first["kernels"]] == ["batchmatmul"]
    assert [k["op"] for k in second["kernels"]] == ["exp"]
    handed = first["kernels"][0]["outputs"][0]
    assert first["tensors"][handed]["role"] == "output"
    assert second["tensors"]["t0"]["role"] == "input"
    assert rep.total_cycles == sum(p["total_cycles"] for p in rep.programs)


def test_an_lx_hand_over_stays_in_one_launch(check):
    check(lambda x: (torch.exp(x * 0.5) + 1.0).sigmoid(), torch.randn(256, 512).half())
    assert len(last_report().kernel_programs) == 1


class _Layers(torch.nn.Module):
    def __init__(self, count: int):
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(128, 128, bias=False) for _ in range(count))

    def forward(self, x):
        for layer in self.layers:
            x = torch.relu(layer(x))
        return x


def test_identical_layers_are_simulated_once_and_exactly(check, monkeypatch):
    simulated = []
    real = pipeline._simulate
    monkeypatch.setattr(pipeline, "_simulate", lambda program, *a: simulated.append(program) or real(program, *a))
    model = _Layers(3).half()
    check(model, torch.randn(16, 128).half())
    rep = last_report()
    texts = [json.dumps(p, sort_keys=True) for p in rep.kernel_programs]
    assert len(texts) == 6
    assert texts[0::2] == [texts[0]] * 3
    assert texts[1::2] == [texts[1]] * 3
    assert len(simulated) == 2  # the matmul launch and the relu launch, once each
    alone = pipeline.run(pipeline.parse(rep.kernel_programs[2], load_machine(), "layer 1"), load_machine(),
                         cache=False)
    assert [p["total_cycles"] for p in rep.programs[2::2]] == [alone.report.total_cycles] * 2
    names = [k["name"] for k in rep.kernels]
    assert len(set(names)) == len(names)  # the report keeps each layer's own kernel names
