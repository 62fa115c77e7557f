"""A pointwise kernel that does not ask for a step count streams in steps of at most what a DMA unit
keeps in flight, so that a core's stores overlap its loads (docs/decisions/dram.md)."""

import re

import pytest

from spyre_emu.config import load_machine
from spyre_emu.kernel_program import parse_kernel_program
from spyre_emu.lowering import lower
from spyre_emu.pipeline import run


def _exp(rows: int, cols: int, steps: int | None = None) -> dict:
    kernel = {"op": "exp", "inputs": ["x"], "outputs": ["y"], "dims": {"mb": rows, "out": cols},
              "work_division": {"mb": 1}}
    if steps:
        kernel["steps"] = steps
    return {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": [rows, cols], "dtype": "fp16", "role": "input", "init": "randn"},
                        "y": {"shape": [rows, cols], "dtype": "fp16", "role": "output"}},
            "kernels": [kernel]}


def _steps(units) -> int:
    tokens = {t for (core, _), stream in units.streams.items() if core == 0 for i in stream for t in i.wait}
    return len({int(q) for t in tokens for q in re.findall(r"\.q(\d+)\.", t)})


@pytest.mark.parametrize(("inflight", "steps"), [(65536, 32), (131072, 16), (1 << 20, 6)])
def test_steps_stop_at_the_inflight_window(inflight, steps):
    """16384 sticks (256 x 4096 fp16) on one core: 65536 B in flight is 512 sticks a step, 32 steps;
    131072 B, 16 steps; 1 MB (8192 sticks) is more than a quarter of the LX budget (input and output,
    two sets: 3174 sticks), so the LX sets the step as before: 6 steps."""
    machine = load_machine(overrides=[f"dma.max_inflight_bytes={inflight}"])
    assert _steps(lower(parse_kernel_program(_exp(256, 4096), "<exp>"), machine)) == steps


def test_a_step_count_asked_for_is_kept(spyre):
    """8 steps of 2048 sticks, each larger than the in-flight window: the kernel's own count stands."""
    assert _steps(lower(parse_kernel_program(_exp(256, 4096, steps=8), "<exp>"), spyre)) == 8


def test_the_first_store_starts_after_two_steps_of_loads(spyre):
    """Double buffering: the first store starts once step 0 is computed, by then only steps 0 and 1
    (2 x 64 KB of the 2 MB) are loaded; with LX-sized steps it was 2 x 406272 B, 39 % of the input."""
    log = run(lower(parse_kernel_program(_exp(256, 4096), "<exp>"), spyre), spyre, cache=False).log
    first_store = min(s for ins, s in zip(log.instructions, log.start, strict=True) if ins.op == "store")
    loaded = sum(ins.args["bytes"] for ins, e in zip(log.instructions, log.end, strict=True)
                 if ins.op == "load" and e <= first_store)
    assert loaded == 2 * 65536


def test_an_lx_output_keeps_lx_sized_steps(spyre):
    """With y kept in LX (64 x 4096 fp16, 4096 sticks, one core) the kernel has no DRAM writes to
    overlap with its reads: steps as large as the LX allows (2150 sticks beside y's 512 KB), two,
    where a DRAM y takes eight of 512 sticks."""
    data = _exp(64, 4096)
    assert _steps(lower(parse_kernel_program(data, "<exp>"), spyre)) == 8
    data["tensors"]["y"]["space"] = "lx"
    assert _steps(lower(parse_kernel_program(data, "<exp>"), spyre)) == 2
