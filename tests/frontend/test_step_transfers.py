"""A step's own copies (frontend/transfers.py): what the caller passes each call goes in, what the card
computed comes out; the module's parameters and buffers, inputs no kernel reads and outputs the host
already holds cross nothing. Sizes by hand from the shapes (fp16: 2 bytes)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import drawer_step, last_report  # noqa: E402

from spyre_emu.host import load_host  # noqa: E402
from tests.frontend import models  # noqa: E402
from tests.host.hand import pcie_us  # noqa: E402

pytestmark = pytest.mark.torch


def _transfers(model, *inputs):
    compiled = torch.compile(model, backend="spyre_emu", dynamic=False, options={"functional": False})
    with torch.no_grad():
        compiled(*inputs)
    return [(t["direction"], t["bytes"], t["source"]) for t in last_report().transfers]


def test_a_step_copies_its_input_in_and_its_result_out_not_its_weights():
    """SwiGLU's three weights are parameters, loaded once; x (1, 16, 64) and the result cross: 2,048 B each."""
    mlp = models.seeded(models.SwiGLU, 64, 256)
    assert _transfers(mlp, models.seeded_input(1, 16, 64)) == [("h2d", 2048, "L['x']"), ("d2h", 2048, "output 0")]


class _Scaled(torch.nn.Module):
    """A buffer (state), an input no kernel reads, an output the caller passed in, a cache of inputs."""

    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((64,), 0.5, dtype=torch.float16))

    def forward(self, x, unused, *cache):
        return x * self.scale + cache[1], x


def test_one_card_prices_its_copies_as_the_drawer_does():
    """SwiGLU on one card: x (2,048 B) in and the result (2,048 B) out. The report's ``copy_us`` is both,
    each the card's PCIe latency (1,100 cycles = 1 µs) then 2,048 B with 24 B of TLP per 512 B at 63 GB/s,
    and ``step_us`` adds them to ``latency_us`` (which leaves them out). The drawer's step on the one card
    pays the same two copies, each 0.105 µs more for its switch: x's under the first launch's patch
    (20 µs), the result's after the last kernel, then the 5 µs completion notice."""
    compiled = torch.compile(models.seeded(models.SwiGLU, 64, 256), backend="spyre_emu", dynamic=False,
                             options={"functional": False, "cards": 1})
    with torch.no_grad():
        compiled(models.seeded_input(1, 16, 64))
    rep = last_report()
    copy = 1.0 + 2048 * 536 / 512 / 63_000
    assert rep.copy_us == pytest.approx(2 * copy, abs=1e-6)
    assert rep.step_us == pytest.approx(rep.latency_us + 2 * copy, abs=1e-6)
    assert f"step: {rep.step_us:.3f} us with its 2 own copies" in rep.to_text()
    rt = load_host().runtime
    card = 0.0
    for k, program in enumerate(rep.programs):  # launch k runs once patched and after launch k - 1
        card = max(card, (k + 1) * rt.patch_us) + program["latency_us"]
    assert pcie_us(2048) == pytest.approx(copy + 0.105)
    assert rep.drawer["step_us"] == pytest.approx(card + pcie_us(2048) + rt.completion_us, abs=1e-3)


def test_state_unread_inputs_and_host_outputs_do_not_cross():
    """x (4 x 64) and cache[1] (4 x 64) go in, 512 B each; the product comes out; the buffer, ``unused``,
    cache[0] (read by nothing) and the returned x itself do not move."""
    x, other = models.seeded_input(4, 64), models.seeded_input(2, 64)
    cache = (models.seeded_input(3, 64), models.seeded_input(4, 64))
    got = _transfers(_Scaled().eval(), x, other, *cache)
    assert sorted(got) == sorted([("h2d", 512, "L['x']"), ("h2d", 512, "L['cache'][1]"), ("d2h", 512, "output 0")])


def test_on_two_cards_each_rank_copies_its_input_and_rank_0_the_replicated_result():
    """The row-parallel SwiGLU's result is all-reduced, so every card holds it whole: only rank 0 copies it
    out. Each rank copies x in."""
    mlp = models.seeded(models.SwiGLU, 64, 256)
    got = drawer_step(mlp, (models.seeded_input(1, 16, 64),), cards=2)
    assert got["copies"] == [2, 1]


def test_arguments_kept_on_the_card_do_not_cross():
    """``on_card=["cache"]``: the cache argument (cache[1], 512 B) stays; x still goes in."""
    x, other = models.seeded_input(4, 64), models.seeded_input(2, 64)
    cache = (models.seeded_input(3, 64), models.seeded_input(4, 64))
    compiled = torch.compile(_Scaled().eval(), backend="spyre_emu", dynamic=False,
                             options={"functional": False, "on_card": ["cache"]})
    with torch.no_grad():
        compiled(x, other, *cache)
    assert [(t["direction"], t["source"]) for t in last_report().transfers] == [("h2d", "L['x']"), ("d2h", "output 0")]


def test_on_card_must_name_arguments():
    with pytest.raises(Exception, match="options.on_card: must be a list of argument names"):
        torch.compile(_Scaled().eval(), backend="spyre_emu", options={"on_card": "cache"})(
            models.seeded_input(4, 64), models.seeded_input(2, 64), models.seeded_input(3, 64),
            models.seeded_input(4, 64))
