"""traces/ holds the reference timelines of the examples; a timing change shows up here.

After an intended change, regenerate them with ``python traces/make_traces.py`` and commit traces/
with the reason (as for tests/golden/cycles.json).
"""

from __future__ import annotations

import gzip
import json

import pytest

from tests.conftest import ROOT
from tests.results.runs import MACHINE, MAKE_TRACES, STEMS, example

TRACES = ROOT / "traces"
UPDATE = ("if the change is intended, regenerate the references with `python traces/make_traces.py` "
          "and commit traces/ with the reason")


def _first_difference(expected: str, got: str) -> str:
    old, new = json.loads(expected)["traceEvents"], json.loads(got)["traceEvents"]
    moved = [i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b]
    if not moved:
        return f"{len(old)} events before, {len(new)} now" if len(old) != len(new) else "the header differs"
    i = moved[0]
    return f"{len(moved)} of {len(old)} events differ, first event {i}: was {old[i]}, now {new[i]}"


@pytest.mark.parametrize("stem", STEMS)
def test_trace_matches_the_reference(stem):
    trace, ideal = MAKE_TRACES.timeline(example(stem), MACHINE)
    reference = TRACES / f"{stem}.json.gz"
    assert reference.exists(), f"traces/{stem}.json.gz is missing: {UPDATE}"
    expected = gzip.decompress(reference.read_bytes()).decode()
    assert trace == expected, f"traces/{stem}.json.gz: {_first_difference(expected, trace)}; {UPDATE}"
    folder = TRACES / f"{stem}_ideal_cycles"
    stored = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*.json")}
    assert ideal == stored, f"traces/{stem}_ideal_cycles/ differs from a fresh run; {UPDATE}"


def test_no_stale_references():
    names = {p.name for p in TRACES.iterdir()} - {"make_traces.py"}
    assert names == {f"{s}.json.gz" for s in STEMS} | {f"{s}_ideal_cycles" for s in STEMS}, UPDATE
