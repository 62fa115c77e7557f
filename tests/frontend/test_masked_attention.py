"""Masked attention on the card gives what torch gives: a query row that sees no key is 0, not NaN."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from spyre_emu.frontend import last_report  # noqa: E402

from tests.frontend.conftest import assert_matches  # noqa: E402

pytestmark = pytest.mark.torch


def _qkv(batch=2, heads=2, kv_heads=2, rows=8, cols=8, dim=64):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(batch, heads, rows, dim, generator=g)
    k, v = (torch.randn(batch, kv_heads, cols, dim, generator=g) for _ in range(2))
    return q.half(), k.half(), v.half()


def _padding(lengths, cols, left):
    """Per batch row, which of ``cols`` keys are real: the last ``n`` (left padding) or the first."""
    at = torch.arange(cols)
    return torch.stack([at >= cols - n if left else at < n for n in lengths])


def _compiled(fn, *args):
    with torch.no_grad():
        return torch.compile(fn, backend="spyre_emu", dynamic=False)(*args)


def _eager(fn, *args):
    with torch.no_grad():
        return fn(*(a.float() if a.is_floating_point() else a for a in args))


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
@pytest.mark.parametrize("kind", ["bool", "additive"])
def test_padded_queries_see_no_key_and_give_zero(kind, left):
    """A causal mask over a padded batch: padded query rows see no key at all (every score -inf)."""
    q, k, v = _qkv()
    real = _padding([8, 5], 8, left)
    mask = torch.ones(8, 8, dtype=torch.bool).tril() & real[:, None, None, :] & real[:, None, :, None]
    if kind == "additive":
        mask = torch.zeros(mask.shape).masked_fill(~mask, -torch.inf).half()

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    got, want = _compiled(fn, q, k, v, mask), _eager(fn, q, k, v, mask)
    assert last_report().fallbacks == []  # a bool mask becomes additive on the card (where3)
    assert not got.isnan().any()
    assert not got[1, :, ~real[1]].any()  # padded rows: zeros, as torch gives
    assert_matches(got, want)


@pytest.mark.parametrize("left", [True, False], ids=["left", "right"])
def test_padded_batch_matches_the_unpadded_runs_row_by_row(left):
    """Grouped-query attention over a padded batch: each real row equals its sequence run alone."""
    q, k, v = _qkv(heads=4, kv_heads=2)
    lengths = [8, 3]
    real = _padding(lengths, 8, left)
    mask = torch.ones(8, 8, dtype=torch.bool).tril() & real[:, None, None, :] & real[:, None, :, None]

    def fn(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True)

    batch = _compiled(fn, q, k, v, mask)
    for row, n in enumerate(lengths):
        keep = real[row]
        alone = _compiled(fn, q[row:row + 1, :, keep], k[row:row + 1, :, keep], v[row:row + 1, :, keep],
                          torch.ones(n, n, dtype=torch.bool).tril())
        assert_matches(batch[row:row + 1, :, keep], alone)


def test_fully_masked_row_fuses_into_one_safe_softmax_kernel():
    """The clamps of the safe softmax are part of the one fused kernel, not kernels of their own."""
    q, k, v = _qkv(batch=1)
    mask = torch.ones(1, 1, 8, 8, dtype=torch.bool)
    mask[..., 0, :] = False
    got = _compiled(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, mask)
    assert not got[:, :, 0].any()
    ops = [row["op"] for row in last_report().kernels]
    assert ops.count("softmax") == 1
    assert "maximum" not in ops
