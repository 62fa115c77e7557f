"""Uneven work divisions: slices that differ by one stick or row, as numpy.array_split cuts."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run


def _program(tmp_path, op, shapes, out_shape, dims, division, uneven=True):
    rng = np.random.default_rng(6)
    arrays = {f"x{i}": (rng.standard_normal(s) * 0.1).astype(np.float16) for i, s in enumerate(shapes)}
    tensors = {n: {"shape": list(a.shape), "dtype": "fp16", "role": "input", "data": f"{n}.npy"}
               for n, a in arrays.items()}
    tensors["y"] = {"shape": list(out_shape), "dtype": "fp16", "role": "output"}
    for n, a in arrays.items():
        np.save(tmp_path / f"{n}.npy", a)
    kernel = {"op": op, "inputs": list(arrays), "outputs": ["y"], "dims": dims, "work_division": division,
              "uneven": uneven}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    return path, [a.astype(np.float32) for a in arrays.values()]


def _cores(program):
    return {i.core for i in program.units.instructions() if i.core >= 0}


def test_pointwise(tmp_path, spyre):
    path, (x,) = _program(tmp_path, "exp", [(63, 129)], (63, 129), {"a": 63, "b": 129}, {"a": 8, "b": 2})
    program = load(path, spyre)
    assert len(_cores(program)) == 16
    np.testing.assert_allclose(run(program, spyre, functional=True).outputs["y"].astype(np.float32), np.exp(x),
                               rtol=3e-3, atol=3e-3)


def test_matmul_columns_split_like_the_decode_calibration(tmp_path, spyre):
    """25 column sticks over 8 cores: one core takes 4, seven take 3; B is read once."""
    path, (a, w) = _program(tmp_path, "batchmatmul", [(4, 256), (256, 1600)], (4, 1600),
                            {"mb": 4, "in": 256, "out": 1600}, {"out": 8})
    program = load(path, spyre)
    b = program.units.buffers["x1"]
    read = sum(i.args["bytes"] for i in program.units.instructions()
               if i.op == "load" and b.addr <= i.args["dram"] < b.addr + b.nbytes)
    assert read == b.nbytes
    np.testing.assert_allclose(run(program, spyre, functional=True).outputs["y"].astype(np.float32), a @ w,
                               rtol=2e-2, atol=2e-2)
    assert len(_cores(program)) == 8


@pytest.mark.parametrize(("op", "shape", "out_shape", "division"), [
    ("sum", (10, 256), (10, 1), {"a": 4}), ("softmax", (10, 200), (10, 200), {"a": 3}),
    ("ReStickifyOpHBM", (130, 64), (130, 64), {"a": 3, "b": 1})])
def test_other_families(tmp_path, spyre, op, shape, out_shape, division):
    path, (x,) = _program(tmp_path, op, [shape], out_shape, {"a": shape[0], "b": shape[1]}, division)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    want = {"sum": x.sum(-1, keepdims=True), "softmax": e / e.sum(-1, keepdims=True), "ReStickifyOpHBM": x}[op]
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def test_even_division_names_the_way_out(tmp_path, spyre):
    path, _ = _program(tmp_path, "exp", [(10, 64)], (10, 64), {"a": 10, "b": 64}, {"a": 4}, uneven=False)
    with pytest.raises(ProgramError, match=r"does not split into 4 equal whole-stick slices; \"uneven\": true"):
        load(path, spyre)


def test_more_slices_than_units(tmp_path, spyre):
    path, _ = _program(tmp_path, "exp", [(3, 64)], (3, 64), {"a": 3, "b": 64}, {"a": 4})
    with pytest.raises(ProgramError, match="fewer than one stick or row for each of 4 slices"):
        load(path, spyre)
