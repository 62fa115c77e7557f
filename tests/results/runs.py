"""The example programs, each simulated once per test session, as traces/make_traces.py runs them."""

from __future__ import annotations

import importlib.util
from functools import cache

from spyre_emu import RunResult, load_machine
from tests.conftest import ROOT


def _make_traces():
    spec = importlib.util.spec_from_file_location("make_traces", ROOT / "traces" / "make_traces.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MAKE_TRACES = _make_traces()
STEMS = [p.stem for p in MAKE_TRACES.EXAMPLES]
MACHINE = load_machine()


@cache
def example(stem: str) -> RunResult:
    return MAKE_TRACES.simulate_example(ROOT / "examples" / "programs" / f"{stem}.json", MACHINE)
