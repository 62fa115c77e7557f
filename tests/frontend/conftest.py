"""Front-end fixtures: a fresh Dynamo per test, and ``check`` comparing a compiled call with eager."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch
# Tolerances per dtype of the compiled result, against eager float32, both normalized by the reference's
# largest magnitude (atol = rtol): fp16 is DLFloat16 on the card (a step of 2^-9 = 2.0e-3); bf16 has 8
# significant bits (2^-7 = 7.8e-3 a step); fp32 kernels compute in float32 as torch does, up to the
# order of a reduction's sums and the SFU's functions (docs/models.md, Numerics).
TOL = {torch.float16: 5e-3, torch.bfloat16: 2e-2, torch.float32: 1e-5}


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _float(x):
    if isinstance(x, torch.nn.Module):
        return copy.deepcopy(x).float()
    return x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def assert_matches(got, want, inputs=()) -> None:
    """Both normalized by the reference's largest magnitude, then atol = rtol = the loosest TOL of
    ``got``'s dtype and the floating ``inputs``' (an fp32 result of fp16 inputs has fp16's)."""
    got_list, want_list = (got, want) if isinstance(want, (tuple, list)) else ([got], [want])
    computed = [x.dtype for x in inputs if isinstance(x, torch.Tensor) and x.is_floating_point()]
    for g, w in zip(got_list, want_list, strict=True):
        scale = max(w.float().abs().max().item(), 1e-6) if w.numel() else 1.0
        tol = max(TOL.get(d, TOL[torch.float16]) for d in (g.dtype, *computed))
        torch.testing.assert_close(g.float() / scale, w.float() / scale, atol=tol, rtol=tol)


@pytest.fixture
def check():
    """Compile ``fn`` with the spyre_emu backend, run it, compare with eager float32 on the same inputs."""
    def run(fn, *inputs, options=None):
        with torch.no_grad():
            got = torch.compile(fn, backend="spyre_emu", options=options, dynamic=False)(*inputs)
            want = _float(fn)(*(_float(x) for x in inputs))
        assert_matches(got, want, inputs)
        return got
    return run
