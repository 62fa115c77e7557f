"""The emulated device after OpenReg's checklist: registration, factories and copies, views and
strides, memory statistics and OOM, eager ops on the card and their fallbacks."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend.device import device_name, register_device, report, state  # noqa: E402
from spyre_emu.frontend.device import module as spyre  # noqa: E402

from tests.conftest import ROOT  # noqa: E402

pytestmark = pytest.mark.torch
MIB = 1 << 20

UNREGISTERED = """
import torch, spyre_emu, spyre_emu.frontend, spyre_emu.frontend.device
assert torch._C._get_privateuse1_backend_name() == "privateuseone"
assert not hasattr(torch, "spyre") and not hasattr(torch.Tensor, "spyre")
try:
    torch.device("spyre")
except RuntimeError:
    pass
else:
    raise AssertionError("the device exists without register_device()")
assert torch.ones(2).add(1).sum().item() == 4.0
"""


def test_importing_registers_nothing():
    done = subprocess.run([sys.executable, "-c", UNREGISTERED], capture_output=True, text=True, cwd=ROOT,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_registration(device):
    assert device == device_name()
    assert register_device() == device  # idempotent
    assert torch._C._get_privateuse1_backend_name() == device
    assert getattr(torch, device) is spyre  # torch.spyre
    assert spyre.is_available()
    assert spyre.device_count() == 1
    assert spyre.current_device() == 0
    t = torch.empty(2, device=device)
    assert t.device == torch.device(device, 0)
    assert t.device.type == device
    assert getattr(t, f"is_{device}")


def test_the_name_gives_way_to_torch_spyre(monkeypatch):
    """Beside torch-spyre (which registers "spyre" itself) the device is "spyre_emu"."""
    find = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "torch_spyre" else find(name))
    assert device_name() == "spyre_emu"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None if name == "torch_spyre" else find(name))
    assert device_name() == "spyre"


def test_factories_and_copies_round_trip(device):
    x = torch.randn(3, 5, dtype=torch.float16)
    d = x.to(device)
    assert d.device.type == device
    assert d.dtype == torch.float16
    assert d.shape == (3, 5)
    assert torch.equal(d.cpu(), x)
    assert getattr(x, device)().device == x.to(f"{device}:0").device == torch.device(device, 0) == d.device
    assert torch.equal(torch.zeros(4, device=device).cpu(), torch.zeros(4))
    assert torch.equal(torch.full((2, 2), 3.0, device=device).cpu(), torch.full((2, 2), 3.0))
    assert torch.equal(torch.arange(6, device=device).cpu(), torch.arange(6))
    y = torch.empty_like(d).copy_(x)  # host -> card into an existing tensor
    assert torch.equal(y.cpu(), x)
    z = torch.empty_like(d).copy_(d)  # card -> card
    assert torch.equal(z.cpu(), x)
    assert d.float().dtype == torch.float32
    assert torch.equal(d.float().cpu(), x.float())
    assert d[1, 2].item() == x[1, 2].item()


def test_copies_are_timed_on_pcie(device):
    """A copy to the card of 1 MiB: the host model's PCIe time, latency plus bytes with TLP overhead
    (512 B payloads + 24 B: 1,048,576 * 536 / 512 = 1,097,728 B at 63 GB/s = 17.4243 us) + 1 us latency
    + 0.105 us through the drawer's PCIe switch."""
    dev = state.current()
    before = len(dev.log.entries)
    torch.empty(1 << 18, device=device).copy_(torch.ones(1 << 18))
    copies = [e.op for e in dev.log.entries[before:] if type(e.op).__name__ == "Copy"]
    assert [(c.direction, c.nbytes) for c in copies] == [("h2d", 1 << 20)]
    spans = [s for s in dev.log.timeline().spans if s.index == before + len(dev.log.entries[before:]) - 1]
    assert len(spans) == 1
    assert spans[0].end - spans[0].start == pytest.approx(1100 / 1.1 / 1000 + 0.105 + (1 << 20) * 536 / 512 / 63000)


def test_a_copy_within_the_card_is_simulated_and_never_beats_dram(device):
    """1 MiB card -> card: the identity kernel program's simulated time, at least the launch plus every
    stick read and written once at the DRAM's peak (16 channels, stick_cycles each)."""
    src = torch.ones(MIB // 4, device=device)
    dev = state.current()
    first = len(dev.log.entries)
    torch.empty_like(src).copy_(src)
    [launch] = [e.op for e in dev.log.entries[first:]]
    machine = dev.machine
    floor = machine.launch.dispatch_cycles + 2 * (MIB // 128) * machine.dram.stick_cycles / machine.dram.channels
    assert launch.program == "copy of 8192 sticks"
    assert launch.card_us * 1.1 * 1000 >= floor


def test_views_and_strides_share_bytes(device):
    x = torch.arange(12.0).reshape(3, 4)
    d = x.to(device)
    t = d.t()
    assert t.shape == (4, 3)
    assert t.stride() == (1, 4)
    assert not t.is_contiguous()
    assert t.data_ptr() == d.data_ptr()
    assert torch.equal(t.cpu(), x.t())
    row = d[1]
    assert row.storage_offset() == 4
    row.fill_(-1.0)  # writes through the view
    x[1] = -1.0
    assert torch.equal(d.cpu(), x)
    assert torch.equal(d.view(2, 6).cpu(), x.view(2, 6))
    assert torch.equal(d[:, 1::2].contiguous().cpu(), x[:, 1::2])
    assert torch.equal(d.unsqueeze(0).expand(2, 3, 4).cpu(), x.expand(2, 3, 4))


def test_memory_statistics(device):
    spyre.empty_cache()
    base = spyre.memory_allocated()
    spyre.reset_peak_memory_stats()
    a = torch.empty(100, dtype=torch.float16, device=device)  # 200 B -> two 128 B blocks
    assert spyre.memory_allocated() - base == 256
    b = torch.empty(64, dtype=torch.float16, device=device)   # exactly one block
    assert spyre.memory_allocated() - base == 384
    view = a[10:]
    del a
    assert spyre.memory_allocated() - base == 384  # the view keeps the allocation
    storage = b.untyped_storage()
    del view, b
    assert spyre.memory_allocated() - base == 128  # a Python reference to b's storage keeps it
    del storage
    assert spyre.memory_allocated() == base
    assert spyre.max_memory_allocated() - base == 384
    assert spyre.memory_stats()["capacity_bytes"] == state.current().machine.dram.size_bytes


OOM = """
import torch
from spyre_emu.frontend.device import register_device
name = register_device(overrides=("dram.size_bytes=1048576",))
keep = torch.empty(1 << 17, device=name)      # 512 KiB of the 1 MiB card
try:
    torch.empty(1 << 18, device=name)         # 1 MiB more
except RuntimeError as exc:
    print(exc)
"""


def test_out_of_memory_is_one_clear_error():
    done = subprocess.run([sys.executable, "-c", OOM], capture_output=True, text=True, cwd=ROOT, timeout=300,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "out of memory on the simulated card: 1048576 B requested, 524288 B free of 1048576 B" in done.stdout


def test_eager_ops_run_on_the_card(device):
    x = torch.randn(8, 64, dtype=torch.float16)
    w = torch.randn(64, 32, dtype=torch.float16)
    d, dw = x.to(device), w.to(device)
    before = report().launches
    got = torch.relu(d @ dw + 1.0).cpu()
    want = torch.relu(x.float() @ w.float() + 1.0)
    torch.testing.assert_close(got.float(), want, atol=0.05, rtol=5e-3)
    assert report().launches > before
    kernels = report().kernels
    assert kernels["aten.mm.default"] >= 1
    assert kernels["aten.relu.default"] >= 1


def test_an_eager_op_is_compiled_once_and_timed_by_its_programs(device):
    """The second identical op reuses the first's plan; each launch carries the front end's latency:
    its kernel programs' simulated cycles at the card's clock."""
    x = torch.randn(16, 128, dtype=torch.float16).to(device)
    dev = state.current()
    first = len(dev.log.entries)
    torch.exp(x)
    plans = len(dev.eager.plans)
    torch.exp(x)
    assert len(dev.eager.plans) == plans
    launches = [e for e in dev.log.entries[first:] if e.report is not None]
    assert len(launches) == 2
    for e in launches:
        assert e.op.card_us == e.report.latency_us
        assert e.report.latency_us == pytest.approx(e.report.total_cycles / 1.1 / 1000, abs=1e-6)
    assert launches[0].op.program == launches[1].op.program


def test_in_place_ops_write_their_argument(device):
    x = torch.randn(4, 64, dtype=torch.float16)
    d = x.to(device)
    ptr = d.data_ptr()
    assert d.mul_(2.0) is d
    assert d.data_ptr() == ptr
    torch.testing.assert_close(d.cpu(), x * 2)


def test_fallbacks_are_counted_and_named(device):
    ids = torch.tensor([[3, 1, 2]]).to(device)
    emb = torch.randn(4, 8).to(device)
    out = torch.nn.functional.embedding(ids, emb)
    assert torch.equal(out.cpu(), torch.nn.functional.embedding(ids.cpu(), emb.cpu()))
    fallbacks = report().fallbacks
    assert any(op.startswith("aten.index_select") for op, _ in fallbacks)  # what embedding runs as
    assert all(reason for _, reason in fallbacks)


def test_a_fallback_moves_its_device_operands_over_pcie(device):
    """An eager cat has no kernel (its one-op graph's parts are inputs, host data to the front end): its two
    device operands (64 B and 32 B) go to the host, the result (96 B) back."""
    a, b = torch.ones(16).to(device), torch.zeros(8).to(device)
    first = len(state.current().log.entries)
    torch.cat([a, b])
    copies = [(e.op.direction, e.op.nbytes) for e in state.current().log.entries[first:]]
    assert copies == [("d2h", 64), ("d2h", 32), ("h2d", 96)]


def test_autograd_through_device_ops(device):
    x = torch.randn(4, 64)
    d = x.to(device).requires_grad_()
    (d * 2.0).relu().sum().backward()
    assert d.grad.device.type == device
    assert torch.equal(d.grad.cpu(), (x > 0).float() * 2)


OPS = {
    "softmax": lambda x: torch.softmax(x, -1),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, (64,)),
    "gelu": torch.nn.functional.gelu,
    "silu": torch.nn.functional.silu,
    "bmm": lambda x: x.reshape(2, 4, 64) @ x.reshape(2, 4, 64).transpose(1, 2),
    "mean": lambda x: x.mean(-1, keepdim=True),
    "sum": lambda x: x.sum(0),
    "exp_sub": lambda x: torch.exp(x - 1.0),
    "where": lambda x: torch.where(x > 0, x, x * 0.5),
    "masked_fill": lambda x: x.masked_fill(x < 0, -1.0),
    "transpose": lambda x: x.t().contiguous() * 2.0,
    "rsqrt": lambda x: torch.rsqrt(x.abs() + 1.0),
    "conv2d": lambda x: torch.nn.functional.conv2d(x.reshape(1, 8, 8, 8), x[:4, :18].reshape(4, 2, 3, 3), padding=1,
                                                   groups=4),
}


@pytest.mark.parametrize("name", list(OPS))
def test_eager_op_matches_the_cpu(device, name):
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(3)).half()
    got = OPS[name](x.to(device))
    assert got.device.type == device
    want = OPS[name](x.float())
    torch.testing.assert_close(got.cpu().float(), want, atol=0.02, rtol=0.01)
