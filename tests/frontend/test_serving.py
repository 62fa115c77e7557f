"""The serving step pricer: a toy decoder's steps compiled timing-only on meta tensors."""

from __future__ import annotations

import json

import pytest
from spyre_emu.frontend.drawer import drawer_step
from spyre_emu.frontend.serving import Decoder, StepPricer, load_model

from spyre_emu.errors import ConfigError
from spyre_emu.serving.models import PRESETS, ModelSpec
from spyre_emu.serving.steps import StepShape

TOY = ModelSpec("toy", layers=3, dim=128, heads=4, kv_heads=2, hidden=256, vocab=512, tied_embeddings=True,
                residual_multiplier=0.5)


def _stack_price(decoder: Decoder, shape: StepShape) -> float:
    head = decoder.head
    decoder.build = lambda s, build=decoder.build: [b for b in build(s) if b[0] is not head]  # the stack alone
    return StepPricer(decoder)(shape)


@pytest.mark.parametrize("shape", [StepShape(2, 1, 128), StepShape(1, 64, 128), StepShape(1, 64, 64)])
def test_three_layers_priced_from_one_and_two_equal_three_layers_compiled(shape):
    """2 x P2 - P1 equals P3 in cycles; each latency is rounded to 1e-6 us, so the two sides may differ by
    0.5e-6 x (2 + 1 + 1) = 2e-6 us (a cycle is 9e-4 us)."""
    direct = _stack_price(Decoder(TOY, extrapolate=False), shape)
    assert _stack_price(Decoder(TOY), shape) == pytest.approx(direct, rel=0, abs=2e-6 + 1e-9)


def test_a_step_is_its_stack_and_its_head():
    decoder, shape = Decoder(TOY), StepShape(2, 1, 192)
    whole = StepPricer(decoder)(shape)
    stack = _stack_price(Decoder(TOY), shape)
    assert whole > stack > 0


def test_the_head_is_cut_into_pieces_a_core_may_span():
    """Granite's head is 49,159 × 4,096 × 2 B = 403 MB: two pieces; Llama's 1,051 MB: four."""
    granite = PRESETS["granite-3.3-8b"]
    spec = ModelSpec("h", 1, granite.dim, granite.heads, granite.kv_heads, 64, granite.vocab, True)
    assert [p.out_features for p in Decoder(spec).head.out] == [24580, 24579]
    llama = ModelSpec("h", 1, 4096, 32, 8, 64, 128256, False)
    assert [p.out_features for p in Decoder(llama).head.out] == [32064] * 4


def test_preset_figures():
    """Granite-3.3-8B: 8,170,864,640 parameters (embedding tied); KV 2 × 40 × 8 × 128 × 2 B per token."""
    granite = load_model("granite-3.3-8b")
    assert granite.weight_bytes() == 2 * 8_170_864_640
    assert granite.kv_bytes_per_token() == 163_840
    assert load_model("tests.frontend.test_serving:TOY").spec == TOY


@pytest.mark.parametrize(("name", "message"), [
    ("gpt-5", "unknown model 'gpt-5'"), ("tests.nowhere:X", "cannot load 'tests.nowhere:X'"),
    ("tests.frontend.test_serving:_stack_price", "neither a ModelSpec nor a model")])
def test_bad_models_are_one_line_errors(name, message):
    with pytest.raises(ConfigError, match=message):
        load_model(name)


def test_step_prices_are_kept_in_the_result_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "1")
    monkeypatch.setenv("SPYRE_EMU_CACHE", str(tmp_path))
    shape = StepShape(1, 1, 64)
    first = StepPricer(Decoder(TOY))(shape)
    again = StepPricer(Decoder(TOY))
    again._simulate = lambda s: pytest.fail("priced again")
    assert again(shape) == first
    other = StepPricer(Decoder(TOY), overrides=("ring.hop_latency_cycles=9",))
    other._simulate = lambda s: -1.0  # another card: a miss
    assert other(shape) == -1.0


ONE_LAYER = ModelSpec("one", layers=1, dim=128, heads=4, kv_heads=2, hidden=256, vocab=512, tied_embeddings=True)


def test_serve_end_to_end_on_a_toy_model(tmp_path, capsys):
    """Three requests of 60 + 3 tokens at once (at most 62 keys: one block): P0 D0 P1 D01 P2 D12 D2."""
    from spyre_emu.cli import main  # noqa: PLC0415
    out = tmp_path / "out"
    out.mkdir()
    args = ["serve", "--model", "tests.frontend.test_serving:ONE_LAYER", "--num-prompts", "3",
            "--random-input-len", "60", "--random-output-len", "3", "--json", str(out / "r.json"),
            "--trace", str(out / "t.json"), "--plot-cdf", str(out / "cdf.png")]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "Successful requests:                     3" in text
    result = json.loads((out / "r.json").read_text())
    assert result["completed"] == 3
    assert result["total_output_tokens"] == 9
    shapes = [tuple(p[:3]) for p in result["card"]["step_prices_us"]]
    assert shapes == [(1, 64, 64), (1, 1, 64), (2, 1, 64)]
    trace = json.loads((out / "t.json").read_text())
    assert {e["tid"] for e in trace["traceEvents"] if e["pid"] == 2 and e["ph"] == "X"} == {0, 1, 2}
    assert sorted(p.name for p in out.iterdir()) == ["cdf.png", "r.json", "t.json"]


def test_a_tensor_parallel_step_is_one_cards_kernels_and_its_all_reduces():
    """TP 2 on one layer: one card's kernel programs plus the drawer's collective time, and the two
    all-reduces of a Megatron layer (after the attention's output projection and the MLP's down one)."""
    decoder, shape = Decoder(ONE_LAYER, extrapolate=False), StepShape(1, 1, 64, tp=2)
    [(module, inputs, _)] = [b for b in decoder.build(shape) if b[0] is not decoder.head]
    step = drawer_step(module, inputs, 2, fallback="error")
    assert step["collectives"] == 2
    assert step["collective_us"] > 0
    assert _stack_price(decoder, shape) == pytest.approx(step["card_us"] + step["collective_us"], rel=1e-9)
