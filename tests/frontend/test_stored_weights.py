"""options weights="stored": parameters stay in their own layout on the card and are relayouted there
before each consumer that reads them in another layout, every call (frontend/layout.py)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from spyre_emu.frontend import last_report  # noqa: E402
from spyre_emu.frontend.layout import RESTICKIFY, same_layout  # noqa: E402

pytestmark = pytest.mark.torch
STORED = {"weights": "stored"}


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 64)).half().eval()


def _kernels() -> list[dict]:
    return [k | {"shapes": [p["tensors"][t]["shape"] for t in (*k["inputs"], *k["outputs"])]}
            for p in last_report().kernel_programs for k in p["kernels"]]


def _ops(kernels: list[dict]) -> list[str]:
    return [k["op"] for k in kernels]


def test_a_stored_linear_weight_is_transposed_on_the_card_before_its_matmul(check):
    """Each Linear weight [out, in] is read by its matmul as [in, out]: one restickify (a 64 x 64
    transpose) from the stored weight before the matmul; the biases, read as (1, out), are the
    stored bytes and need none. The result is torch's."""
    model, x = _mlp(), torch.randn(32, 128).half()
    check(model, x)
    default = _ops(_kernels())
    torch._dynamo.reset()
    check(model, x, options=STORED)
    kernels = _kernels()
    assert default == ["batchmatmul", "add", "relufwd", "batchmatmul", "add"]
    assert _ops(kernels) == [RESTICKIFY, *default[:3], RESTICKIFY, *default[3:]]
    relayouts = [(k["shapes"], k["attrs"]["perm"]) for k in kernels if k["op"] == RESTICKIFY]
    assert relayouts == [([[256, 128], [128, 256]], [1, 0]), ([[64, 256], [256, 64]], [1, 0])]


def test_the_relayouts_add_their_cycles_to_every_call():
    """Timing-only, second call: the stored call's kernels are the default's with the same cycles, plus the
    two transposes."""
    model, x = _mlp(), torch.randn(32, 128).half()
    cycles = {}
    for weights in ("prepared", "stored"):
        torch._dynamo.reset()
        compiled = torch.compile(model, backend="spyre_emu", dynamic=False,
                                 options={"functional": False, "weights": weights})
        with torch.no_grad():
            compiled(x)
            compiled(x)
        cycles[weights] = [(k["op"], k["cycles"]) for k in last_report().kernels]
    relayouts = [c for op, c in cycles["stored"] if op == RESTICKIFY]
    assert len(relayouts) == 2
    assert min(relayouts) > 0
    assert [k for k in cycles["stored"] if k[0] != RESTICKIFY] == cycles["prepared"]


class _Used(nn.Module):
    """A weight read in its own layout (x @ w with w [in, out]), one read transposed twice (the same
    Linear applied twice), and a buffer read transposed."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(128, 128) / 16)
        self.lin = nn.Linear(128, 128, bias=False)
        self.register_buffer("b", torch.randn(128, 128) / 16)

    def forward(self, x):
        return self.lin(self.lin(x @ self.w)) @ self.b.t()


def test_one_relayout_per_weight_none_for_one_in_its_consumers_layout_nor_for_buffers(check):
    model, x = _Used().half().eval(), torch.randn(64, 128).half()
    check(model, x)
    default = _ops(_kernels())
    torch._dynamo.reset()
    check(model, x, options=STORED)
    assert default == ["batchmatmul"] * 4
    assert _ops(_kernels()) == ["batchmatmul", RESTICKIFY, "batchmatmul", "batchmatmul", "batchmatmul"]


def test_a_norm_weight_is_read_as_stored():
    """An RMS norm's weight (n,) is read as (1, n): the same bytes in the default layout."""
    norm = nn.RMSNorm(256, eps=1e-6).half().eval()
    kernels = {}
    for weights in ("prepared", "stored"):
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(norm, backend="spyre_emu", dynamic=False,
                          options={"functional": False, "weights": weights})(torch.randn(16, 256).half())
        kernels[weights] = last_report().kernel_programs
    assert kernels["stored"] == kernels["prepared"]


@pytest.mark.parametrize(("a", "b", "same"), [
    ((4096,), (1, 4096), True),          # a leading dim of one
    ((4096,), (1, 1, 4096), True),
    ((256, 128), (256, 128), True),
    ((2, 64, 128), (128, 128), False),   # (d1, sticks, d0) against (sticks, rows): other places
    ((256, 128), (128, 256), False),
])
def test_same_layout(a, b, same):
    assert same_layout(a, b, "fp16") is same



class _Writes(nn.Module):
    """A graph that writes a buffer goes through aot_autograd (trace.py), whose inputs list the parameters
    among the lifted state: the weight is still found."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(128, 64, bias=False)
        self.register_buffer("cache", torch.zeros(4, 64))

    def forward(self, x):
        y = self.lin(x)
        self.cache.copy_(y[:4])
        return y * 2


def test_a_weight_through_aot_autograd_is_relayouted_once():
    torch.manual_seed(0)
    model, x = _Writes().half().eval(), torch.randn(32, 128).half()
    ops = {}
    for weights in ("prepared", "stored"):
        torch._dynamo.reset()
        with torch.no_grad():
            torch.compile(model, backend="spyre_emu", dynamic=False,
                          options={"functional": False, "weights": weights})(x)
        ops[weights] = _ops(_kernels())
    assert ops["stored"] == [RESTICKIFY, *ops["prepared"]]
    assert ops["prepared"][0] == "batchmatmul"


def test_on_two_cards_each_card_transposes_its_own_shard(check):
    """Tensor parallel (Megatron: the first Linear split by its outputs, the second by its inputs): each
    card holds its shard of every weight as stored, [128, 128] here, and transposes that shard before its
    matmul; the drawer's result is torch's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(128, 256), nn.ReLU(), nn.Linear(256, 128)).half().eval()
    x = torch.randn(32, 128).half()
    check(model, x, options={"cards": 2, **STORED})
    relayouts = [(k["shapes"], k["attrs"]["perm"]) for k in _kernels() if k["op"] == RESTICKIFY]
    assert relayouts == [([[128, 128], [128, 128]], [1, 0])] * 2
