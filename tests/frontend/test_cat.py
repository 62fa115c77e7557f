"""torch.cat of values the card computed is a ``cat`` kernel (whole sticks moved by DMA), not a host round
trip: against eager float32, with its host steps and PCIe round trips counted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

pytestmark = pytest.mark.torch


def _x(*shape):
    torch.manual_seed(sum(shape))
    return torch.randn(*shape).half()


def _on_card() -> list[str]:
    """The report's kernel ops, after asserting nothing crossed to the host."""
    rep = last_report()
    assert (rep.fallbacks, rep.crossings) == ([], [])
    assert [s["op"] for s in rep.host_steps if s["kind"] != "constant"] == []
    return [k["op"] for k in rep.kernels]


def test_cats_along_rows_and_the_last_dim(check):
    def fn(a, b, c):
        x, y, z = a.exp(), b.sin(), c.cos()
        return torch.cat([x, y], 0).tanh(), torch.cat([x, z], -1) * 2
    check(fn, _x(4, 128), _x(6, 128), _x(4, 64))
    assert _on_card().count("cat") == 2


CASES = {
    "kv_cache": (lambda past, new: torch.cat([past, new.exp()], dim=-2) * 2, [(1, 2, 5, 64), (1, 2, 1, 64)]),
    "class_token": (lambda cls, patches: torch.cat([cls.expand(2, 1, 96), patches * 2], 1).tanh(),
                    [(1, 1, 96), (2, 9, 96)]),
    "three_padded": (lambda a, b: torch.cat([a.exp(), b, a], 1).sigmoid(), [(3, 2, 70), (3, 4, 70)]),
    "last_dim_padded": (lambda a, b: torch.cat([a * 2, b.exp()], -1) + 1, [(2, 3, 128), (2, 3, 40)]),
}


@pytest.mark.parametrize("name", CASES)
def test_cat_with_host_data_beside_card_values(check, name):
    """Host data beside a computed part is copied in, as for any kernel's operand (a past cache, a class
    token): the cat itself runs on the card."""
    fn, shapes = CASES[name]
    check(fn, *(_x(*s) for s in shapes))
    assert "cat" in _on_card()


def test_a_cat_splitting_sticks_stays_on_the_host(check):
    """Along the last dim, a part of 40 elements before another would put two parts in one stick."""
    check(lambda a, b: torch.cat([a.exp(), b.exp()], -1) + 1, _x(4, 40), _x(4, 64))
    rep = last_report()
    assert "cat" not in [k["op"] for k in rep.kernels]
    assert [s["op"] for s in rep.host_steps] == ["aten.cat.default"]
