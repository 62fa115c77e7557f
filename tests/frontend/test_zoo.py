"""The model zoo through torch.compile: each model's default call runs and matches eager float32."""

from __future__ import annotations

import copy
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from spyre_emu.frontend import capture, last_report  # noqa: E402

from tests.frontend import zoo  # noqa: E402
from tests.frontend.conftest import assert_matches  # noqa: E402

pytestmark = pytest.mark.torch
# no CPU fallback and no PCIe round trip: slices of fused projections are restickify kernels (view_ops.py),
# a mixture of experts' top-k and experts dense kernels (topk.py, experts.py)
ON_THE_CARD = {"gpt2", "llama", "granite", "granitemoe", "qwen2", "qwen3", "mistral", "mixtral", "gemma", "gemma2",
               "gemma3", "phi3"}


@pytest.mark.parametrize("name", list(zoo.MODELS))
def test_default_call_matches_eager(name):
    model, inputs = zoo.build(name)
    reference = copy.deepcopy(model).float()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = zoo.first_output(torch.compile(model, backend="spyre_emu", dynamic=False)(**inputs))
        want = zoo.first_output(reference(**{k: v.float() if v.is_floating_point() else v for k, v in inputs.items()}))
    assert not got.isnan().any()
    ties = sorted(zoo.near_router_ties(model, inputs))  # mixtral: position 10 (logits 5.3e-5 apart in layer 1)
    assert len(ties) <= zoo.SEQ // 8
    if ties:  # the card may route these tokens to the other expert: judged on the rest, scaled as a whole
        keep = [p for p in range(got.shape[1]) if p not in ties]
        scale = want.float().abs().max()
        got, want = got[:, keep] / scale, want[:, keep] / scale
    assert_matches(got, want)
    if got.dim() > 2:  # token or patch positions: the largest logit is the same everywhere
        assert torch.equal(got.float().argmax(-1), want.argmax(-1))
    rep = last_report()
    assert rep.kernels
    assert 0 < rep.card_flop_share <= 1
    if name in ON_THE_CARD:
        assert rep.fallbacks == []
        assert rep.crossings == []
        assert any(k["op"] == "embedding" for k in rep.kernels)  # the token lookup is a kernel
    if name == "vit":  # the class token and the patches joined by a cat kernel, not through the host
        assert (rep.fallbacks, rep.crossings) == ([], [])
        assert any(k["op"] == "cat" for k in rep.kernels)
    if name == "resnet18":  # convolutions and pooling on the card; the 3-channel stem's padding is not a stick
        assert [f["op"] for f in rep.fallbacks] == ["aten.constant_pad_nd.default"]


@pytest.mark.parametrize(("name", "cache", "steps"), [("gpt2", "dynamic", 10), ("llama", "static", 8)])
def test_generate_matches_eager_token_for_token(name, cache, steps):
    """Greedy generation, the same tokens as eager and every step simulated. With the default
    DynamicCache as people write it, ``torch.compile(model).generate(...)`` (the module's generate
    runs its compiled forward, and the module's own forward is back afterwards): more steps than
    Dynamo's default recompile limit of 8, each new length a graph of its own, and GPT-2's fused
    c_attn split on the card through decode steps where a part is also copied in from the host (the
    slice kernel stays, its value was never computed). With a static cache through
    ``model.forward = torch.compile(model.forward)``: llama's rotary decode steps, the issue's 8 tokens.
    One model a cache keeps the module's time down; benchmarks/model_zoo.py --generate runs every decoder."""
    model, inputs = zoo.build(name)
    ids = inputs["input_ids"][:, :8]
    extra = {"cache_implementation": "static"} if cache == "static" else {}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        want = model.generate(ids, max_new_tokens=steps, do_sample=False, **extra)
        if cache == "static":
            model.forward = torch.compile(model.forward, backend="spyre_emu", dynamic=False)
            generate = model.generate
        else:
            generate = torch.compile(model, backend="spyre_emu", dynamic=False).generate
        with capture() as reports:
            got = generate(ids, max_new_tokens=steps, do_sample=False, **extra)
    assert torch.equal(got, want)
    assert len(reports) == steps
    if cache == "dynamic":  # each decode step grows the cache by a cat kernel on the card
        assert all(any(k["op"] == "cat" for k in r.kernels) for r in reports[1:])
    assert ("forward" in model.__dict__) == (cache == "static")
