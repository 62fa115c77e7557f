"""The example programs, each simulated once per test session, as traces/make_traces.py runs them."""

from __future__ import annotations

from functools import cache

from spyre_emu import RunResult, load_machine
from tests.conftest import ROOT, load_script

MAKE_TRACES = load_script(ROOT / "traces" / "make_traces.py")
STEMS = [p.stem for p in MAKE_TRACES.EXAMPLES]
MACHINE = load_machine()


@cache
def example(stem: str) -> RunResult:
    return MAKE_TRACES.simulate_example(ROOT / "examples" / "programs" / f"{stem}.json", MACHINE)
