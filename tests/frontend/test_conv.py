"""Convolution and max pooling on the card: channels-last windows (a ``patches`` kernel), a matmul, a max."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

pytestmark = pytest.mark.torch


def _ops():
    return [k["op"] for k in last_report().kernels]


@pytest.mark.parametrize(("cin", "cout", "k", "s", "p"), [(64, 64, 3, 1, 1), (64, 128, 3, 2, 1), (128, 64, 1, 2, 0)])
def test_convolution_of_whole_channel_sticks_runs_on_the_card(check, cin, cout, k, s, p):
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(cin, cout, k, s, p).half().eval()
    check(conv, torch.randn(1, cin, 8, 8).half())
    rep = last_report()
    assert (rep.fallbacks, rep.crossings) == ([], [])
    assert _ops()[:2] == ["patches", "batchmatmul"]


def test_max_pool_runs_on_the_card(check):
    check(torch.nn.MaxPool2d(3, 2, 1), torch.randn(2, 64, 9, 9).half())
    rep = last_report()
    assert (rep.fallbacks, rep.crossings) == ([], [])
    assert _ops() == ["patches", "max"]


def test_a_block_keeps_its_channels_last(check):
    """conv, batch norm, relu, conv, residual add: the pointwise ops run in the matmuls' (channels-last)
    order, so nothing is restickified between them."""
    torch.manual_seed(0)

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Conv2d(64, 64, 3, 1, 1, bias=False), torch.nn.Conv2d(64, 64, 3, 1, 1, bias=False)
            self.bn = torch.nn.BatchNorm2d(64)

        def forward(self, x):
            return torch.relu(self.b(torch.relu(self.bn(self.a(x)))) + self.a(x))

    check(Block().half().eval(), torch.randn(1, 64, 8, 8).half())
    assert "ReStickifyOpHBM" not in _ops()[2:-1]
    assert last_report().fallbacks == []
