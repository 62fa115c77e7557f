"""Tensor parallelism from torch.compile(..., options={"cards": N}): Megatron-style shards, each card's
results combined by collectives, against eager float32; the drawer's step through the host model."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import capture, drawer_step, last_report, step_us  # noqa: E402

from spyre_emu.host import collective_us, load_host  # noqa: E402
from spyre_emu.host.drawer import DRAWER_PID  # noqa: E402
from tests.conftest import assert_acelyzer_verifies  # noqa: E402
from tests.frontend import models  # noqa: E402
from tests.host.hand import pcie_us  # noqa: E402
from tests.host.perfetto import problems  # noqa: E402

pytestmark = pytest.mark.torch


_x, _model = models.seeded_input, models.seeded


def _collectives() -> list[str]:
    return [s["op"] for s in last_report().host_steps if s["kind"] == "collective"]


def test_a_llama_layer_on_two_cards_all_reduces_twice(check, tmp_path):
    """Q, K, V, gate and up column-parallel, O and down row-parallel: two all-reduces, no gather; the
    KV heads split over the cards. The trace option adds the host model's timeline, and names each
program's own cycle-level timeline: all of them keep Perfetto's rules."""
    layer = _model(models.LlamaLayer, 128, 4, 2, 256)
    cos, sin = models.rope(16, 32)
    check(layer, _x(1, 16, 128), cos, sin, options={"cards": 2, "trace": str(tmp_path / "t.json")})
    assert _collectives() == ["all_reduce", "all_reduce"]
    drawer = last_report().drawer
    assert (drawer["cards"], drawer["collectives"]) == (2, 2)
    trace = tmp_path / "t.json"  # the step's one timeline: host ranks, drawer, cards; flows
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" and e["pid"] == DRAWER_PID for e in events) == 2
    assert sum(e["ph"] == "s" and e["cat"] == "launch" for e in events) == 2 * drawer["launches"]
    assert problems(events) == []
    kernels = {e["args"]["trace"] for e in events if e["ph"] == "X" and "trace" in e["args"]}
    assert kernels
    assert all((tmp_path / name).is_file() for name in kernels)
    for name in kernels:  # each program's cycle-level timeline keeps them too (its DMA units' lanes)
        assert problems(json.loads((tmp_path / name).read_text())["traceEvents"]) == [], name
    assert_acelyzer_verifies(trace, tmp_path)


def test_decode_with_a_kv_cache_shards_the_cache_by_heads(check):
    layer = _model(models.LlamaLayer, 128, 4, 2, 256)
    cos, sin = models.rope(1, 32, start=31)
    keys, values = _x(1, 2, 32, 32), _x(2, 1, 32, 32).reshape(1, 2, 32, 32)
    check(layer, _x(1, 1, 128), cos, sin, keys, values, options={"cards": 2})
    assert _collectives() == ["all_reduce", "all_reduce"]


def test_biases_are_split_with_columns_and_added_once_after_the_all_reduce(check):
    check(_model(models.GPT2Block, 128, 4), _x(1, 16, 128), options={"cards": 2})
    assert _collectives() == ["all_reduce", "all_reduce"]


@pytest.mark.parametrize("cards", [4, 8])
def test_what_does_not_split_is_gathered_and_still_right(check, cards):
    """Two KV heads cannot go to 4 or 8 cards: attention's values are all-gathered, the result is right."""
    layer = _model(models.LlamaLayer, 128, 4, 2, 256)
    cos, sin = models.rope(16, 32)
    check(layer, _x(1, 16, 128), cos, sin, options={"cards": cards})
    assert "all_gather" in _collectives()


class NormedMLP(torch.nn.Module):
    """A norm over the hidden dim between the two linears: the hidden values cannot stay split."""

    def __init__(self):
        super().__init__()
        self.up, self.norm, self.down = torch.nn.Linear(64, 256), torch.nn.LayerNorm(256), torch.nn.Linear(256, 64)

    def forward(self, x):
        return self.down(torch.relu(self.norm(self.up(x))))


def test_a_norm_over_split_columns_gathers_them_first(check):
    check(_model(NormedMLP), _x(1, 16, 64), options={"cards": 2})
    assert _collectives() == ["all_gather"]


@pytest.mark.parametrize(("hidden", "cards"), [(192, 8), (100, 8), (96, 4)])
def test_any_split_or_none_gives_the_right_result(check, hidden, cards):
    """Slices of 24 columns (less than a stick of 64), or 100 columns that 8 cards cannot split (gate
    and up stay whole on every card, down's 64 output columns split and are put together on the
    host): always eager's result."""
    check(_model(models.SwiGLU, 64, hidden), _x(1, 8, 64), options={"cards": cards})
    assert _collectives() == ([] if hidden % cards else ["all_reduce"])


def test_one_card_is_the_graph_itself(check):
    check(_model(models.SwiGLU, 64, 256), _x(1, 16, 64), options={"cards": 1})
    assert _collectives() == []
    assert last_report().drawer["collectives"] == 0


def test_the_drawer_step_of_a_row_parallel_mlp_by_hand():
    """SwiGLU on 2 cards, warm: each rank patches its launches one after another (20 µs each); its card
    runs launch k (its simulated time, which starts with the card's dispatch) once launch k is patched
    and launch k - 1 has ended; the host learns of the last end 5 µs later and the all-reduce of the
    (1, 16, 64) fp16 result (2,048 B) follows, then rank 0 copies the result out (the step's copies,
    frontend/transfers.py)."""
    mlp = _model(models.SwiGLU, 64, 256)
    with capture() as reports:
        got = drawer_step(mlp, (_x(1, 16, 64),), cards=2)
    programs = [p["latency_us"] for p in reports[-1].programs]
    host = load_host()
    rt = host.runtime

    reduce = collective_us("all_reduce", 2048, 2, host.drawer, pcie_us)
    card = 0.0
    for k, us in enumerate(programs):
        card = max(card, (k + 1) * rt.patch_us) + us
    # x's copy in (1 µs) ends under the first patch; rank 0 copies the all-reduced result out
    want = card + rt.completion_us + reduce + pcie_us(2048) + rt.completion_us
    assert got["step_us"] == pytest.approx(want, abs=1e-3)
    assert got["collective_us"] == pytest.approx(reduce, abs=1e-3)
    assert got["card_busy_us"] == [pytest.approx(sum(programs), abs=1e-3)] * 2
    assert step_us(mlp, (_x(1, 16, 64),), cards=2) == got["step_us"]


def test_a_bad_card_count_or_host_config_is_one_line(tmp_path):
    with pytest.raises(Exception, match=r"options.cards: must be a number of cards from 1 to 8"):
        torch.compile(_model(models.SwiGLU, 64, 256), backend="spyre_emu", options={"cards": 9})(_x(1, 16, 64))
    bad = tmp_path / "host.toml"
    bad.write_text("[runtime]\n")
    with pytest.raises(Exception, match=r"host.toml: runtime.deserialize_us: missing key"):
        torch.compile(_model(models.SwiGLU, 64, 256), backend="spyre_emu",
                      options={"cards": 2, "host": str(bad)})(_x(1, 16, 64))
