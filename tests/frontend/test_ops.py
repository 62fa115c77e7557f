"""Every ATen op the front end maps, against eager float32: shapes that need padding and broadcasting."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from spyre_emu.frontend import last_report  # noqa: E402

pytestmark = pytest.mark.torch


def _x(*shape, positive=False):
    torch.manual_seed(sum(shape))
    x = torch.randn(*shape)
    return (x.abs() + 0.5 if positive else x).half()


UNARY = {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "relu": torch.relu, "silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "pow2": lambda x: x.pow(2), "pow3": lambda x: torch.pow(x, 3.0), "pow_neg2": lambda x: (x.abs() + 1).pow(-2),
    "clamp": lambda x: x.clamp(-0.5, 0.7), "clamp_min": lambda x: x.clamp(min=0.1),
    "scalar_ops": lambda x: (x * 0.5 + 1) / 3 - 2,
}
POSITIVE = {"log": torch.log, "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "reciprocal": torch.reciprocal}


@pytest.mark.parametrize("name", [*UNARY, *POSITIVE])
@pytest.mark.parametrize("shape", [(4, 64), (3, 5, 70)])  # (3, 5, 70): a padded last stick
def test_unary(check, name, shape):
    fn = UNARY.get(name) or POSITIVE[name]
    check(fn, _x(*shape, positive=name in POSITIVE))
    assert last_report().fallbacks == []


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "maximum": torch.maximum,
          "minimum": torch.minimum, "add_alpha": lambda a, b: torch.add(a, b, alpha=2)}


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize(("a", "b"), [((8, 128), (8, 128)), ((2, 8, 96), (96,)), ((2, 8, 96), (2, 8, 1)),
                                      ((6, 64), (6, 1))])
def test_binary_with_broadcasting(check, name, a, b):
    y = _x(*b, positive=True) if name == "div" else _x(*b)
    check(BINARY[name], _x(*a), y)
    assert last_report().fallbacks == []


@pytest.mark.parametrize("op", [torch.gt, torch.ge, torch.lt, torch.le, torch.eq, torch.ne])
def test_comparisons_and_where(check, op):
    a, b = _x(4, 64), _x(4, 64)
    b[0] = a[0]
    check(lambda a, b: torch.where(op(a, b), a, b * 2), a, b)
    assert last_report().fallbacks == []


def test_where_with_scalar(check):
    check(lambda x: torch.where(x > 0, x, 0.0), _x(5, 64))


def test_isinf_on_the_card(check):
    x = _x(4, 64)
    x[1, 3], x[2, 60] = torch.inf, -torch.inf
    check(lambda x: torch.where(torch.isinf(x * 2), 0.0, x), x)
    assert last_report().fallbacks == []


def test_t5_overflow_guard_on_the_card(check):
    """T5's fp16 guard: isinf, any, and a clamp by a 0-d tensor, all kernels."""
    def guard(h):
        h = h * 3
        top = torch.finfo(h.dtype).max
        bound = torch.where(torch.isinf(h).any(), top - 1000, top)
        return torch.clamp(h, min=-bound, max=bound) + torch.clamp(h, max=h.amax(-1, keepdim=True) / 2)
    check(guard, _x(2, 8, 64))
    assert last_report().fallbacks == []


@pytest.mark.parametrize("fn", [
    lambda x: x.sum(-1), lambda x: x.mean(-1, keepdim=True), lambda x: x.amax(-1, keepdim=True),
    lambda x: x.amin(-1), lambda x: x.sum(0), lambda x: x.mean((0, 1)), lambda x: x.amax(1, keepdim=True),
    lambda x: x.sum(),
], ids=["sum_last", "mean_last_keep", "amax_last", "amin_last", "sum0", "mean01", "amax1", "sum_all"])
def test_reductions(check, fn):
    check(fn, _x(3, 8, 64))


def test_average_pool_of_a_1x1_image_is_a_view(check):
    """A mean over dims of one element reduces nothing: no kernel the lowering would refuse."""
    check(lambda x: (x * 2).mean((2, 3)), _x(1, 512, 1, 1))
    check(lambda x: (x * 2).mean((2, 3), keepdim=True) + 1, _x(2, 64, 1, 1))
    check(lambda x: (x * 2).mean((1, 2)), _x(2, 1, 1, 64))
    assert last_report().fallbacks == []


@pytest.mark.parametrize(("a", "b"), [((16, 64), (64, 128)), ((24, 100), (100, 70)), ((1, 256), (256, 64))])
def test_mm(check, a, b):
    check(torch.mm, _x(*a), _x(*b))
    assert last_report().fallbacks == []


def test_bmm_and_addmm_and_linear(check):
    check(torch.bmm, _x(4, 16, 64), _x(4, 64, 32))
    check(torch.addmm, _x(32), _x(8, 64), _x(64, 32))
    check(F.linear, _x(2, 8, 64), _x(96, 64), _x(96))


def test_softmax_and_layer_norm(check):
    check(lambda x: torch.softmax(x, -1), _x(4, 8, 100))
    check(lambda x, w, b: F.layer_norm(x, (96,), w, b), _x(4, 96), _x(96), _x(96))
    check(lambda x: F.layer_norm(x, (64,)), _x(3, 64))


def test_embedding_cat_and_views(check):
    ids = torch.tensor([[1, 5, 2], [0, 3, 3]])
    check(lambda w, i: F.embedding(i, w) * 2, _x(8, 64), ids)
    check(lambda a, b: torch.cat([a, b], -1).exp(), _x(4, 64), _x(4, 64))
    check(lambda x: x.view(2, 4, 64).permute(1, 0, 2).reshape(4, 128).transpose(0, 1).sigmoid(), _x(8, 64))
    check(lambda x: x[:, 1:3].unsqueeze(0).expand(2, 4, 2, 64).tanh(), _x(4, 4, 64))


def test_rotate_half_is_a_matmul_on_the_card(check):
    check(lambda x: torch.cat([-x[..., 40:], x[..., :40]], -1) * x.exp(), _x(2, 6, 80))
    rep = last_report()
    assert "batchmatmul" in [k["op"] for k in rep.kernels]
    assert (rep.crossings, rep.host_steps) == ([], [])


def test_a_value_concatenated_with_itself_stays_on_the_card(check):
    """RoPE's cat((freqs, freqs), -1) in fp32 is a broadcast; a copy beside a negated slice a matmul."""
    check(lambda x: torch.cat([x, x], -1).cos(), torch.randn(1, 16, 16))
    assert "identity" in _ops()
    assert last_report().crossings == []
    check(lambda x: torch.cat([x, -x[..., :8]], -1).exp(), _x(4, 16))
    assert "batchmatmul" in _ops()
    assert last_report().crossings == []


def test_expand_of_a_computed_value_is_an_identity_kernel(check):
    check(lambda x: x.exp().unsqueeze(1).expand(4, 3, 64).reshape(12, 64).tanh(), _x(4, 64))
    rep = last_report()
    assert "identity" in [k["op"] for k in rep.kernels]
    assert rep.crossings == []


def _ops():
    return [k["op"] for k in last_report().kernels]


def test_patch_convolution_is_a_matmul_on_the_card(check):
    """A convolution whose kernel tiles the image (a ViT's patch embedding): patches are a view."""
    conv = torch.nn.Conv2d(3, 64, 8, 8).half().eval()
    check(conv, torch.randn(1, 3, 32, 32).half())
    assert last_report().fallbacks == []
    assert "batchmatmul" in _ops()


def test_padded_convolution_unfolds_on_the_host_and_multiplies_on_the_card(check):
    conv = torch.nn.Conv2d(16, 32, 3, 1, 1, bias=False).half().eval()
    check(conv, torch.randn(1, 16, 16, 16).half())
    rep = last_report()
    assert "batchmatmul" in _ops()
    assert not any("convolution" in f["op"] for f in rep.fallbacks)
    assert rep.card_flop_share > 0.9


def test_batch_norm_in_eval_is_a_multiply_add_on_the_card(check):
    bn = torch.nn.BatchNorm2d(16).eval()
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    bn.weight.data.uniform_(0.5, 1.5)
    bn.bias.data.uniform_(-1, 1)
    check(bn.half(), torch.randn(1, 16, 8, 64).half())
    assert last_report().fallbacks == []


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32])
@pytest.mark.parametrize("k", [1, 2, 3])
def test_topk_is_rounds_of_max_on_the_card(dtype, k):
    """torch's values; indices that hold them, the lowest position first among ties (torch promises no
    order there), torch's own elsewhere; no fallback. The inputs are multiples of 1/64 below 4, exact in
    DLFloat16."""
    x = ((_x(2, 5, 40).float() * 64).round() / 64).to(dtype)
    x[0, 1, 7] = x[0, 1, 30] = x[0, 1].max() + 1  # a tie for the top
    x[1, 2, :] = 0.5  # a row of ties
    with torch.no_grad():
        got = torch.compile(lambda x: torch.topk(x.abs(), k), backend="spyre_emu", dynamic=False)(x)
    want = torch.topk(x.float().abs(), k)
    assert torch.equal(got.values.float(), want.values)
    assert got.values.dtype == dtype
    assert torch.equal(x.float().abs().gather(-1, got.indices), want.values)
    assert got.indices[0, 1, 0] == 7
    assert got.indices[1, 2].tolist() == list(range(k))
    untied = torch.ones(2, 5, dtype=torch.bool)
    untied[0, 1] = untied[1, 2] = False
    assert torch.equal(got.indices[untied], want.indices[untied])
    assert last_report().fallbacks == []

