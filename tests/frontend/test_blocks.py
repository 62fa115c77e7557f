"""Transformer blocks at small dims through torch.compile, against eager float32."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

from tests.frontend import models  # noqa: E402

pytestmark = pytest.mark.torch


_x, _model = models.seeded_input, models.seeded


def test_swiglu_mlp(check):
    check(_model(models.SwiGLU, 64, 192), _x(1, 16, 64))
    assert [k["op"] for k in last_report().kernels].count("silu") == 1


def test_rms_norm(check):
    check(_model(models.RMSNorm, 128), _x(2, 8, 128))
    assert [k["op"] for k in last_report().kernels] == ["rmsnorm"]


def test_hf_rms_norm_runs_its_fp32_island_on_the_card(check):
    """The casts to float32 and back, pow, mean, rsqrt and mul are card kernels: no fallback, no
    round trip, the result within fp16 tolerance of eager float32."""
    check(_model(models.HFRMSNorm, 128), _x(2, 8, 128))
    rep = last_report()
    assert rep.fallbacks == []
    assert rep.crossings == []
    assert "to_dtype" in [k["op"] for k in rep.kernels]


def test_layer_norm(check):
    check(_model(torch.nn.LayerNorm, 96), _x(2, 8, 96))
    assert [k["op"] for k in last_report().kernels] == ["layernorm"]


@pytest.mark.parametrize("kv_heads", [4, 2], ids=["multi_head", "grouped_query"])
def test_attention(check, kv_heads):
    check(_model(models.Attention, 128, 4, kv_heads), _x(1, 16, 128))
    rep = last_report()
    ops = [k["op"] for k in rep.kernels]
    assert ops.count("softmax") == 1
    assert ops.count("batchmatmul") == 6
    assert rep.crossings == []  # head permutes and K transposed by restickify on the card


def test_gpt2_block(check):
    check(_model(models.GPT2Block, 128, 2), _x(1, 16, 128))
    ops = [k["op"] for k in last_report().kernels]
    assert ops.count("gelufwd") == 1
    assert ops.count("layernorm") == 2


def test_bert_layer(check):
    check(_model(models.BertLayer, 128, 2, 256), _x(2, 8, 128))


def test_llama_layer(check):
    layer = _model(models.LlamaLayer, 128, 4, 2, 256)
    cos, sin = models.rope(16, 32)
    check(layer, _x(1, 16, 128), cos, sin)
    rep = last_report()
    assert rep.fallbacks == []
    assert rep.crossings == []  # RoPE's rotate_half is a matmul, the views restickify on the card
    assert {"rmsnorm", "softmax", "silu", "batchmatmul", "ReStickifyOpHBM"} <= {k["op"] for k in rep.kernels}
    assert {"op": "where3", "kind": "constant", "reason": ""} in rep.host_steps  # the causal mask, folded
