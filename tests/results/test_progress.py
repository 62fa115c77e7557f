"""The progress bar: only on a terminal, only after its delay; the engine calls it between slices of
its loop, and slicing does not change the results."""

from __future__ import annotations

import io

import numpy as np

from spyre_emu.engine import simulate
from spyre_emu.pipeline import load_program
from spyre_emu.results.progress import ProgressBar, line
from tests.conftest import ROOT


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_line():
    assert line(1_204_512, 2310, 6176, 6_200_000, 2.0) == (
        "[########................]  37% 2,310/6,176 instructions | 1,204,512 cycles | 3.1 M events/s")


def test_draws_on_a_terminal_after_the_delay():
    now = [0.0]
    out = Terminal()
    bar = ProgressBar(out, delay_s=1.0, clock=lambda: now[0])
    bar(100, 1, 4, 1000)
    assert out.getvalue() == ""  # too early
    now[0] = 2.0
    bar(200, 2, 4, 4000)
    bar.close()
    drawn = line(200, 2, 4, 4000, 2.0)
    assert out.getvalue() == "\r" + drawn + "\r" + " " * len(drawn) + "\r"  # drawn, then erased


def test_silent_off_a_terminal_and_for_short_runs():
    now = [0.0]
    pipe = io.StringIO()
    bar = ProgressBar(pipe, delay_s=1.0, clock=lambda: now[0])
    now[0] = 5.0
    bar(1, 1, 1, 1)
    bar.close()
    short = Terminal()
    quick = ProgressBar(short, clock=lambda: 0.5)
    quick(1, 1, 1, 1)
    quick.close()
    assert pipe.getvalue() == short.getvalue() == ""


def test_slices_of_the_loop_give_the_same_log(spyre):
    program = load_program(ROOT / "examples" / "programs" / "softmax_lx_kernels.json", spyre)
    calls = []
    sliced = simulate(program, spyre, progress=lambda *a: calls.append(a), events_per_call=997)
    whole = simulate(program, spyre)
    for name in ("start", "end", "first_push", "order", "unit_stats", "channel_stats", "link_stats",
                 "stall_data", "stall_room"):
        assert np.array_equal(getattr(sliced, name), getattr(whole, name)), name
    assert len(calls) > 10
    cycles, done, total, events = zip(*calls, strict=True)
    assert list(cycles) == sorted(cycles)
    assert list(done) == sorted(done)
    assert set(total) == {len(program.instructions())}
    assert list(events) == [997 * (i + 1) for i in range(len(calls))]
