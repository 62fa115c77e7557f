"""Front-end fixtures: a fresh Dynamo per test, and ``check`` comparing a compiled call with eager."""

from __future__ import annotations

import copy

import pytest

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.torch
TOL = 5e-3


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _float(x):
    if isinstance(x, torch.nn.Module):
        return copy.deepcopy(x).float()
    return x.float() if isinstance(x, torch.Tensor) and x.is_floating_point() else x


def assert_matches(got, want) -> None:
    """Both normalized by the reference's largest magnitude, then atol = rtol = 5e-3."""
    got_list, want_list = (got, want) if isinstance(want, (tuple, list)) else ([got], [want])
    for g, w in zip(got_list, want_list, strict=True):
        scale = max(w.float().abs().max().item(), 1e-6) if w.numel() else 1.0
        torch.testing.assert_close(g.float() / scale, w.float() / scale, atol=TOL, rtol=TOL)


@pytest.fixture
def check():
    """Compile ``fn`` with the spyre_emu backend, run it, compare with eager float32 on the same inputs."""
    def run(fn, *inputs, options=None):
        with torch.no_grad():
            got = torch.compile(fn, backend="spyre_emu", options=options, dynamic=False)(*inputs)
            want = _float(fn)(*(_float(x) for x in inputs))
        assert_matches(got, want)
        return got
    return run
