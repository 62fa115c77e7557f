"""Models moved with ``.to(device)``: a small MLP and a tiny Hugging Face decoder (forward and greedy
generate()) give the CPU's results, with their matmuls on the simulated card."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spyre_emu.frontend.device import report, state  # noqa: E402

from tests.frontend import zoo  # noqa: E402
from tests.frontend.conftest import assert_matches  # noqa: E402

pytestmark = pytest.mark.torch


def _mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 32)).half().eval()


def test_small_model_matches_cpu(device):
    model = _mlp()
    x = torch.randn(16, 64, dtype=torch.float16)
    with torch.no_grad():
        want = copy.deepcopy(model).float()(x.float())
        before = report().kernels["aten.addmm.default"]
        moved = model.to(device)
        assert all(p.device.type == device for p in moved.parameters())
        got = moved(x.to(device)).cpu()
    assert_matches(got, want)
    assert report().kernels["aten.addmm.default"] == before + 2


def test_hugging_face_decoder_forward_and_generate(device):
    model, inputs = zoo.build("llama")
    ids = inputs["input_ids"][:, :8]
    with torch.no_grad():
        want = model(ids).logits
        want_tokens = model.generate(ids, max_new_tokens=4, do_sample=False)
        moved = copy.deepcopy(model).to(device)
        got = moved(ids.to(device)).logits.cpu()
        tokens = moved.generate(ids.to(device), max_new_tokens=4, do_sample=False)
    assert_matches(got, want)
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    assert tokens.device.type == device
    assert torch.equal(tokens.cpu(), want_tokens)
    assert report().kernels["aten.mm.default"] > 0
    assert report().kernels["aten.bmm.default"] > 0  # attention in fp16 on the card, not the CPU kernel's float32


def test_compile_on_device_tensors_stays_on_the_card(device):
    """torch.compile(backend="spyre_emu") of a module whose parameters are on the device: the compiled
    graph reads them where they are (no PCIe copy) and leaves its output there."""
    model = _mlp()
    x = torch.randn(16, 64, dtype=torch.float16)
    with torch.no_grad():
        want = copy.deepcopy(model).float()(x.float())
        moved, dx = model.to(device), x.to(device)
        entries = len(state.current().log.entries)
        got = torch.compile(moved, backend="spyre_emu", dynamic=False)(dx)
        ran = state.current().log.entries[entries:]
        assert got.device.type == device
        assert [e.label for e in ran] == ["compiled graph"]  # one launch, no copy
        assert ran[0].report.kernels
        assert_matches(got.cpu(), want)
