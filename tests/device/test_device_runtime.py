"""Streams, events, synchronization, rng, storage save/load and the device's report: each timing
figure derived by hand from configs/spyre.toml [pcie] and configs/host.toml [runtime]."""

from __future__ import annotations

import io
import json

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend.device import module as spyre  # noqa: E402
from spyre_emu.frontend.device import report, state  # noqa: E402

from spyre_emu.host import Copy, Launch  # noqa: E402
from tests.conftest import assert_acelyzer_verifies  # noqa: E402

pytestmark = pytest.mark.torch

MIB = 1 << 20
PCIE_US = 1100 / 1.1 / 1000 + 0.105 + MIB * (512 + 24) / 512 / 63000  # latency, the switch, 1 MiB + TLP at 63 GB/s
COMPLETION_US, PATCH_US = 5.0, 20.0                               # configs/host.toml [runtime]


def _spans(first: int) -> dict[int, object]:
    """The host model's span of each log entry issued from ``first`` on, by entry index."""
    return {s.index: s for s in state.current().log.timeline().spans if s.index >= first
            and not s.where == "host"}


def _entries(first: int, kind: type) -> list[int]:
    return [i for i, e in enumerate(state.current().log.entries) if i >= first and isinstance(e.op, kind)]


def test_event_elapsed_time_is_simulated(device):
    """Two 1 MiB copies in order on one stream, an event between them and one after: the second
    copy starts when the first ends, so the events are one copy's PCIe time apart."""
    dst, src = torch.empty(MIB // 4, device=device), torch.ones(MIB // 4)
    start, end = spyre.Event(enable_timing=True), spyre.Event(enable_timing=True)
    dst.copy_(src)
    start.record()
    dst.copy_(src)
    end.record()
    assert start.elapsed_time(end) == pytest.approx(PCIE_US / 1000, rel=1e-12)


def test_an_event_on_an_idle_stream_after_a_wait_is_when_the_host_resumes(device):
    """A 1 MiB copy on s1, an event behind it, s2 waits for it, then an event on s2 (no work there):
    the host resumes completion_us after the copy ends, and so the second event is 5 us later."""
    dst, src = torch.empty(MIB // 4, device=device), torch.ones(MIB // 4)
    s1, s2 = spyre.Stream(), spyre.Stream()
    with spyre.stream(s1):
        dst.copy_(src)
        copied = s1.record_event()
    s2.wait_event(copied)
    later = s2.record_event()
    assert copied.elapsed_time(later) == pytest.approx(COMPLETION_US / 1000, abs=1e-12)


def test_streams_overlap_copies_with_compute_until_an_event_orders_them(device):
    """A 16 MiB copy on one stream and a kernel on another run at once (the copy has its own DMA
    queue); after the second stream waits for an event recorded behind the copy, the kernel starts
    when the host learns the copy is done (completion_us) and has patched the launch (patch_us)."""
    x = torch.ones(64, 64, dtype=torch.float16, device=device)
    x * 2.0  # the kernel program is built once: later launches only patch addresses
    big, host = torch.empty(4 * MIB, device=device), torch.ones(4 * MIB)
    s1, s2 = spyre.Stream(), spyre.Stream()
    first = len(state.current().log.entries)
    with spyre.stream(s1):
        big.copy_(host)
    with spyre.stream(s2):
        x * 2.0
    spans = _spans(first)
    copy, kernel = (spans[_entries(first, kind)[0]] for kind in (Copy, Launch))
    assert kernel.start < copy.end  # overlapped
    first = len(state.current().log.entries)
    with spyre.stream(s1):
        big.copy_(host)
        done = s1.record_event()
    s2.wait_event(done)
    with spyre.stream(s2):
        x * 2.0
    spans = _spans(first)
    copy, kernel = (spans[_entries(first, kind)[0]] for kind in (Copy, Launch))
    assert kernel.start == pytest.approx(copy.end + COMPLETION_US + PATCH_US, abs=1e-9)


def test_one_kernel_at_a_time_and_in_order_per_stream(device):
    x = torch.ones(64, 64, dtype=torch.float16, device=device)
    s1, s2 = spyre.Stream(), spyre.Stream()
    first = len(state.current().log.entries)
    for s in (s1, s2, s1, s2):
        with spyre.stream(s):
            x + 1.0
    kernels = sorted((_spans(first)[i] for i in _entries(first, Launch)), key=lambda s: s.start)
    assert len(kernels) == 4
    assert all(b.start >= a.end for a, b in zip(kernels, kernels[1:], strict=False))


def test_item_and_cpu_synchronize(device):
    x = torch.full((8,), 2.0, device=device)
    before = state.current().log.syncs
    assert (x * 3.0).sum().item() == 48.0
    x.cpu()
    assert state.current().log.syncs == before + 2


def test_rng_is_seeded_per_device(device):
    spyre.manual_seed(7)
    a = torch.randn(16, device=device)
    spyre.manual_seed(7)
    b = torch.randn(16, device=device)
    c = torch.randn(16, device=device)
    assert torch.equal(a.cpu(), b.cpu())
    assert not torch.equal(b.cpu(), c.cpu())
    assert torch.equal(a.cpu(), torch.randn(16, generator=torch.Generator().manual_seed(7)))  # the CPU's numbers
    assert spyre.initial_seed() == 7
    saved = spyre.get_rng_state()
    d = torch.rand(4, device=device)
    spyre.set_rng_state(saved)
    assert torch.equal(torch.rand(4, device=device).cpu(), d.cpu())


def test_storage_save_and_load_with_map_location(device):
    x = torch.randn(3, 4)
    d = x.to(device)
    buf = io.BytesIO()
    torch.save({"w": d, "view": d[1:]}, buf)
    buf.seek(0)
    on_cpu = torch.load(buf, map_location="cpu")
    assert on_cpu["w"].device.type == "cpu"
    assert torch.equal(on_cpu["w"], x)
    buf.seek(0)
    back = torch.load(buf)
    assert back["w"].device.type == device
    assert torch.equal(back["w"].cpu(), x)
    assert back["view"].untyped_storage().data_ptr() == back["w"].untyped_storage().data_ptr()
    buf = io.BytesIO()
    torch.save(x, buf)
    buf.seek(0)
    moved = torch.load(buf, map_location=device)
    assert moved.device.type == device
    assert torch.equal(moved.cpu(), x)


def test_report_names_everything_and_its_timeline_passes_acelyzer(device, tmp_path):
    x = torch.randn(8, 64, dtype=torch.float16).to(device)
    torch.relu(x).cpu()
    rep = report()
    assert rep.launches > 0
    assert rep.copies["h2d"][0] > 0
    assert rep.simulated_us > 0
    text = rep.to_text()
    assert "aten.relu.default" in text
    path = tmp_path / "device.json"
    path.write_text(rep.chrome_trace())
    events = json.loads(path.read_text())["traceEvents"]
    assert len([e for e in events if e.get("cat") == "kernel"]) == rep.launches
    assert len([e for e in events if e.get("cat") == "memcpy"]) == sum(n for n, _ in rep.copies.values())
    assert_acelyzer_verifies(path, tmp_path)
