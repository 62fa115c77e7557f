"""The readers of a single figure's words under fuzzing: whatever sizes, cores, splits and PT utilizations an entry
states, reading a data folder ends (no search over absurd core counts), raises nothing but the file-wide errors,
and gives each entry a case that either has a program or says why not."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st

from spyre_emu.validation.calibration import load_cases
from tests.conftest import calibration_folder

ROW = ("kv", "decode", 1, 8, 1024, 4096, (1, 1, 16, 2))
SIZES = st.sampled_from([0, 1, 2, 3, 64, 100, 512, 4096, 12800, 10**9])
TEMPLATES = [
    "SwiGLU MLP [{a},{b}] x [{b},{c}]", "SwiGLU MLP [{a},{b},{c}] x [{d},{c},{e}]",
    "gated MLP, hidden {a}, intermediate {b}, {c} tokens, {d} cores", "SwiGLU, Granite, decode, batch {a}",
    "neg of {a}×{b}, {c} cores", "add of two {a}×{b}, {c} cores", "max along the row of {a}×{b}, {c} cores",
    "softmax {a}×{b} in {c} LX tiles, chain of {d}, {e} cores",
    "LX to LX shift over the ring, every core c sends {a} B to core c+1, {b} cores",
    "scatter over the ring, {a} B per move, {b} cores", "matmul [{a},{b}] x [{c},{d}]",
    "matmul [{a},{b},{c}] x [{d},{c},{e}] with split m={e}, n={a}", "decode matmul [{a},{b},{c}]×[{c},{d}], {e} cores",
]
ENTRIES = st.fixed_dictionaries(
    {"what": st.builds(lambda t, v: t.format(**dict(zip("abcde", v, strict=True))), st.sampled_from(TEMPLATES),
                       st.tuples(*[SIZES] * 5))},
    optional={"device_us": st.sampled_from([10.0, None, 0, "x", {"old": 5.0, "new": None}]),
              "pt_util_pct": st.sampled_from([50, [1, 2], [5, 1], {"low": 3}, "x", None]),
              "split": st.sampled_from([None, {"m": 0}, {"m": 4, "n": 8}, "m4", {"old": {"m": 2}}])})


@settings(max_examples=150, deadline=2000, derandomize=True)
@given(entries=st.lists(ENTRIES, min_size=1, max_size=3))
@example(entries=[{"what": "decode matmul [1,64,4096]×[4096,1024], 1000000000 cores"}])  # searched 10⁹ cores
@example(entries=[{"what": "SwiGLU MLP [64,128] x [128,256], 0 cores", "device_us": 1.0}])  # crashed the reader
def test_every_entry_is_read_as_a_case_or_a_reason(entries):
    with tempfile.TemporaryDirectory() as folder:
        singles = [{"name": f"x{i}", **entry} for i, entry in enumerate(entries)]
        cases = load_cases(calibration_folder(Path(folder), [ROW], singles))[0][1:]  # the row is the first case
    assert {c.name.split(".")[0] for c in cases} == {s["name"] for s in singles}
    assert all(bool(c.program) != bool(c.problem) for c in cases), [(c.name, c.problem) for c in cases]
