"""A timing-only call on meta tensors gives the outputs torch would, without running the ATen graph."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import runtime  # noqa: E402

pytestmark = pytest.mark.torch


class _Outputs(torch.nn.Module):
    """A transposed (strided) result, an input passed through, a view of an input, and a half of a
    float32 sum: shapes, strides, dtypes and identity each differ."""

    def forward(self, x, y):
        z = torch.mm(x, y).t()
        return z, x, y.view(-1), (x.float().sum(0) + 1).half()


def _signature(outputs, args) -> list:
    return [(tuple(o.shape), o.stride(), o.dtype, o.device.type, [o is a for a in args]) for o in outputs]


def test_meta_outputs_are_torchs_and_the_graph_is_not_run(monkeypatch):
    ran = []
    real = runtime.CompiledGraph.__init__

    def spy(self, gm, *rest):
        real(self, gm, *rest)
        gm.register_forward_pre_hook(lambda module, args: ran.append(args))
    monkeypatch.setattr(runtime.CompiledGraph, "__init__", spy)
    args = (torch.empty(64, 128, device="meta").half(), torch.empty(128, 32, device="meta").half())
    with torch.no_grad():
        got = torch.compile(_Outputs(), backend="spyre_emu", dynamic=False)(*args)
    assert _signature(got, args) == _signature(_Outputs()(*args), args)
    assert ran == []  # read off the trace
    cpu = tuple(torch.randn(a.shape).half() for a in args)
    with torch.no_grad():
        torch.compile(_Outputs(), backend="spyre_emu", dynamic=False, options={"functional": False})(*cpu)
    assert ran  # real tensors: torch computes the values
