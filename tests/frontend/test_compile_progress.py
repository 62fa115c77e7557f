"""Progress during a long first compile: drawn on a terminal only, and only after DELAY seconds."""

from __future__ import annotations

import io
import time

import pytest

pytest.importorskip("torch")

from spyre_emu.frontend import progress  # noqa: E402


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 0.05)


def test_status_appears_on_a_terminal_after_the_delay(quick):
    out = Terminal()
    with progress.status("simulating 3 kernel programs", out):
        time.sleep(0.3)
    assert out.getvalue().startswith("\rspyre_emu: simulating 3 kernel programs ...")
    assert out.getvalue().endswith(" s\n")


def test_no_status_for_a_quick_block_or_without_a_terminal(quick):
    fast, pipe = Terminal(), io.StringIO()
    with progress.status("quick", fast):
        pass
    with progress.status("slow", pipe):
        time.sleep(0.3)
    assert fast.getvalue() == ""
    assert pipe.getvalue() == ""


def test_bar_counts_programs_on_a_terminal_only(quick):
    out = Terminal()
    for _ in progress.bar(list(range(4)), "lowering kernel programs", out):
        time.sleep(0.1)
    assert "spyre_emu: lowering kernel programs" in out.getvalue()
    assert "/4 " in out.getvalue()  # i/n programs
    pipe = io.StringIO()
    assert list(progress.bar([1, 2], "lowering", pipe)) == [1, 2]
    assert pipe.getvalue() == ""
