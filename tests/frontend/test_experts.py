"""A Hugging Face mixture-of-experts layer as the card runs it (frontend/experts.py): every expert on
every token, weighted by the router's top-k spread over all experts, against transformers' own."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from spyre_emu.frontend import experts  # noqa: E402
from spyre_emu.frontend.experts import dense_experts, on_card  # noqa: E402
from transformers.integrations.moe import grouped_mm_experts_forward  # noqa: E402

from tests.frontend import zoo  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.mark.parametrize("name", ["granitemoe", "mixtral"])
def test_dense_experts_equal_grouped_experts(name):
    model, _ = zoo.build(name)
    layer = next(m for m in model.float().modules() if type(m).__name__.endswith("Experts"))
    torch.manual_seed(1)
    x = torch.randn(10, zoo.HIDDEN)
    index = torch.stack([torch.randperm(layer.num_experts)[:2] for _ in range(10)])
    weights = torch.rand(10, 2)
    with torch.no_grad():
        torch.testing.assert_close(dense_experts(layer, x, index, weights),
                                   grouped_mm_experts_forward(layer, x, index, weights), atol=1e-5, rtol=1e-5)


def test_the_switch_is_for_the_block_only_and_leaves_dense_models_alone():
    moe, _ = zoo.build("granitemoe")
    before = moe.get_experts_implementation()
    with on_card(moe):
        assert set(moe.get_experts_implementation().values()) == {experts.IMPLEMENTATION}
    assert moe.get_experts_implementation() == before
    dense, _ = zoo.build("llama")
    with on_card(dense):
        assert experts.IMPLEMENTATION not in dense.get_experts_implementation().values()
