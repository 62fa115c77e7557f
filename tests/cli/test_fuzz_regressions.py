"""Bugs the fuzz tests found, each pinned by the smallest case that showed it."""

import pytest

from spyre_emu.cli import LINE_BREAKS, main
from tests.conftest import ROOT


@pytest.mark.parametrize("char", list(LINE_BREAKS), ids=[f"U+{ord(c):04X}" for c in LINE_BREAKS])
def test_a_message_holding_any_line_break_stays_one_line(capsys, char):
    """--set clock.ghz=<U+001E> printed two lines: only \\n and \\r were escaped, str.splitlines breaks at ten."""
    assert main(["run", "x.json", "--config", str(ROOT / "configs" / "tiny.toml"), "--set", f"clock.ghz=a{char}b"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1
    assert err.startswith("spyre-emu: error: --set clock.ghz=a\\")
