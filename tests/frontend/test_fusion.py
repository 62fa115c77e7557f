"""Composite ops written in primitives become one kernel each, and still match eager."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

pytestmark = pytest.mark.torch


def _x(*shape):
    torch.manual_seed(len(shape))
    return torch.randn(*shape).half()


def rms_norm(x, w):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w


def gelu_new(x):  # GPT-2's GELU
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def silu(x):
    return x * torch.sigmoid(x)


def softmax(x):
    e = (x - x.amax(-1, keepdim=True)).exp()
    return e / e.sum(-1, keepdim=True)


@pytest.mark.parametrize(("fn", "op", "shapes"), [
    (rms_norm, "rmsnorm", [(6, 128), (128,)]), (gelu_new, "gelufwd", [(6, 128)]), (silu, "silu", [(6, 128)]),
    (softmax, "softmax", [(6, 100)]), (lambda x: torch.softmax(x, -1), "softmax", [(2, 3, 64)]),
    (lambda x, w, b: torch.nn.functional.layer_norm(x, (96,), w, b), "layernorm", [(5, 96), (96,), (96,)]),
], ids=["rmsnorm", "gelu_new", "silu", "softmax_manual", "softmax", "layernorm"])
def test_fused_into_one_kernel(check, fn, op, shapes):
    check(fn, *(_x(*s) for s in shapes))
    assert [k["op"] for k in last_report().kernels] == [op]


def test_a_shared_intermediate_is_not_fused_away(check):
    def fn(x):
        s = torch.sigmoid(x)
        return x * s + s  # the sigmoid is read twice: it must stay
    check(fn, _x(4, 64))
    assert "sigmoid" in [k["op"] for k in last_report().kernels]
