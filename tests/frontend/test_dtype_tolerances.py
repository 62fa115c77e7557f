"""The numerics tolerances per dtype (conftest.TOL), each checked: fp32 graphs on the card within fp32
tolerance of eager float32, bf16 within bf16's; the card runs them (no CPU fallback)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from spyre_emu.frontend import last_report  # noqa: E402

from tests.frontend.conftest import TOL  # noqa: E402

pytestmark = pytest.mark.torch

OPS = {
    "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "silu": F.silu, "gelu": F.gelu,
    "rsqrt": lambda x: (x.abs() + 0.5).rsqrt(), "div": lambda x: x / (x.abs() + 1), "pow2": lambda x: x.pow(2),
    "sum": lambda x: x.sum(-1), "mean0": lambda x: x.mean(0), "amax": lambda x: x.amax(-1),
    "softmax": lambda x: torch.softmax(x, -1), "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
    "rms_norm": lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6),
    "where": lambda x: torch.where(x > 0, x, -x * 2),
}


def _x(dtype: torch.dtype) -> torch.Tensor:
    return torch.randn(6, 200, generator=torch.Generator().manual_seed(3)).to(dtype)  # a padded last stick


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_op_within_its_dtype_tolerance(check, name, dtype):
    got = check(OPS[name], _x(dtype))
    assert got.dtype == dtype
    assert last_report().fallbacks == []


def test_the_tolerances_are_tight_enough_to_fail():
    """A result one fp16 step off everywhere passes at fp16 tolerance and fails at fp32's; fp32's own
    rounding (one ulp) passes."""
    want = torch.linspace(-1, 1, 256)
    off = want * (1 + 2 ** -9)
    torch.testing.assert_close(off, want, atol=TOL[torch.float16], rtol=TOL[torch.float16])
    with pytest.raises(AssertionError):
        torch.testing.assert_close(off, want, atol=TOL[torch.float32], rtol=TOL[torch.float32])
    torch.testing.assert_close(want.nextafter(torch.tensor(2.0)), want, atol=TOL[torch.float32],
                               rtol=TOL[torch.float32])
