"""Slices, splits and selects of values the card computed run on the card as restickify kernels
(a gather of whole sticks, or a transposed window when the slice starts inside a stick), not as
host round trips: each against eager float32, with its PCIe round trips counted."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

pytestmark = pytest.mark.torch


def _x(*shape):
    torch.manual_seed(sum(shape))
    return torch.randn(*shape).half()


CASES = {
    # a fused QKV projection's split at stick boundaries (phi3, gpt2): gathers of whole sticks
    "split_aligned": (lambda x: [p * 2 for p in (x + 1).split([128, 64, 64], dim=-1)], (1, 16, 256)),
    "chunk_aligned": (lambda x: [p + 1 for p in torch.relu(x).chunk(2, dim=-1)], (2, 8, 256)),
    # inside a stick: the window is transposed out and back
    "slice_unaligned": (lambda x: torch.exp(x)[..., 16:80] + 1, (3, 5, 96)),
    "split_unaligned": (lambda x: [p * 2 for p in (x + 1).split([40, 56], dim=-1)], (16, 96)),
    # other dims: rows of sticks
    "slice_rows": (lambda x: torch.exp(x)[:, 3:11] * 2, (2, 16, 64)),
    "select": (lambda x: (x * 2).select(1, 2) + 1, (4, 6, 70)),
    "unbind": (lambda x: [p + 1 for p in (x * 2).unbind(0)], (3, 8, 64)),
    "slice_fp32": (lambda x: (x.float() * 2)[..., 32:96].half(), (4, 128)),
    "slice_fp32_unaligned": (lambda x: (x.float() * 2)[..., 8:40].half(), (4, 64)),
}


@pytest.mark.parametrize("name", CASES)
def test_slices_on_the_card(check, name):
    fn, shape = CASES[name]
    check(fn, _x(*shape))
    rep = last_report()
    assert rep.crossings == []
    assert rep.fallbacks == []
    assert any(k["op"] == "ReStickifyOpHBM" for k in rep.kernels)


def test_slice_of_an_input_stays_a_host_view(check):
    """Slicing what the host holds is input preparation: no kernel."""
    check(lambda x: x[..., 16:80] + 1, _x(4, 96))
    rep = last_report()
    assert not any(k["op"] == "ReStickifyOpHBM" for k in rep.kernels)
    assert rep.crossings == []


def test_a_split_read_as_heads_reads_the_window(check):
    """Each part's heads view is restickified straight from its window of the projection, with no copy
    of the part first (the slice kernels nothing else reads are dropped): the layout pass's two steps
    a part ((16, 128) -> (16, 2, 64) -> (2, 16, 64)), the first reading the window. (A softmax: a
    pointwise op would run in the part's own order, the heads view of its result, with no restickify.)"""
    def qkv(x):
        return tuple(torch.softmax(p.view(1, 16, 2, 64).transpose(1, 2), -1) for p in (x * 2).split(128, dim=-1))
    check(qkv, _x(1, 16, 384))
    rep = last_report()
    assert rep.crossings == []
    moves = [k for p in rep.kernel_programs for k in p["kernels"] if k["op"] == "ReStickifyOpHBM"]
    assert len(moves) == 6
    assert sorted(k["attrs"].get("window", [])[2:] for k in moves if "window" in k["attrs"]) == [
        [0, 128], [128, 256], [256, 384]]
