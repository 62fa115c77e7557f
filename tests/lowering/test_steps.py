"""Kernel ``steps``: each core does its share in that many double-buffered steps (a counted loop)."""

import json
import re

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from tests.conftest import card_fp16


def _program(tmp_path, op, steps, shape=(64, 1024), division=None):
    x = card_fp16(np.random.default_rng(2).standard_normal(shape)).astype(np.float16)  # values the card holds
    np.save(tmp_path / "x.npy", x)
    y_shape = [shape[0], 1] if op == "sum" else list(shape)
    kernel = {"op": op, "inputs": ["x"], "outputs": ["y"], "dims": {"mb": shape[0], "out": shape[1]},
              "work_division": division or {"mb": 2}}
    if steps:
        kernel["steps"] = steps
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": "fp16", "role": "input", "data": "x.npy"},
                        "y": {"shape": y_shape, "dtype": "fp16", "role": "output"}},
            "kernels": [kernel]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path, x


@pytest.mark.parametrize(("op", "steps"), [("exp", 1), ("exp", 4), ("exp", 7), ("sum", 4), ("softmax", 8)])
def test_steps_set_the_chunks_and_keep_the_values(tmp_path, spyre, op, steps):
    path, x = _program(tmp_path, op, steps)
    program = load(path, spyre)
    tokens = {t for (core, _), stream in program.units.streams.items() if core == 0 for i in stream for t in i.wait}
    assert {int(q) for t in tokens for q in re.findall(r"\.q(\d+)\.", t)} == set(range(steps))
    f = x.astype(np.float32)
    e = np.exp(f - f.max(-1, keepdims=True))
    want = {"exp": np.exp(f), "sum": f.sum(-1, keepdims=True), "softmax": e / e.sum(-1, keepdims=True)}
    got = run(program, spyre, functional=True).outputs["y"].astype(np.float32)
    if op == "sum":  # each step's partial sum is stored as fp16: off by up to half a DLFloat16 step, 2^-10 of it
        partials = np.cumsum(np.stack(np.split(f, steps, -1)).sum(-1), 0)
        np.testing.assert_allclose(got[:, 0], want[op][:, 0], rtol=0, atol=steps * 2.0 ** -10 * np.abs(partials).max())
    else:
        np.testing.assert_allclose(got, want[op], rtol=1e-2, atol=2e-2)


def test_too_few_steps_overflow_lx(tmp_path, spyre):
    path, _ = _program(tmp_path, "exp", 1, shape=(1024, 1024), division={"mb": 1})  # 2 MB, one step
    with pytest.raises(ProgramError, match=r"kernels\[0\].steps: LX overflow: 1 steps of 16384 need more LX"):
        load(path, spyre)


def test_more_steps_overlap_more(tmp_path, spyre):
    """One step cannot overlap loading with computing; several can."""
    cycles = []
    for steps in (1, 8):
        (tmp_path / str(steps)).mkdir()
        path, _ = _program(tmp_path / str(steps), "exp", steps)
        cycles.append(run(load(path, spyre).units, spyre).report.total_cycles)
    assert cycles[1] < cycles[0]
