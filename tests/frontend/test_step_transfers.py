"""A step's own copies (frontend/transfers.py): what the caller passes each call goes in, what the card
computed comes out; the module's parameters and buffers, inputs no kernel reads and outputs the host
already holds cross nothing. Sizes by hand from the shapes (fp16: 2 bytes)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import drawer_step, last_report  # noqa: E402

from tests.frontend import models  # noqa: E402

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
