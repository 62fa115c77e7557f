"""Reductions along the last dim (keepdim) lowered to SFU ops: values against numpy, divisions."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run

REFERENCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def _program(tmp_path, op, shape, slices):
    out_shape = [*shape[:-1], 1]
    dims = {f"d{i}": n for i, n in enumerate(shape)}
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": "fp16", "role": "input", "data": "x.npy"},
                        "y": {"shape": out_shape, "dtype": "fp16", "role": "output"}},
            "kernels": [{"name": "r", "op": op, "inputs": ["x"], "outputs": ["y"], "dims": dims,
                         "work_division": dict(zip(dims, slices, strict=True))}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    return path, x


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize(("shape", "slices"), [((64, 256), (8, 1)), ((3, 7, 128), (3, 1, 1)),
                                               ((512, 1024), (32, 1)), ((1000, 64), (1, 1))])
def test_values_match_numpy(tmp_path, spyre, op, shape, slices):
    path, x = _program(tmp_path, op, shape, slices)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=-1, keepdims=True)
    tol = 2e-2 * np.sqrt(shape[-1]) if op == "sum" else 1e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=tol)


@pytest.mark.parametrize("op", ["sum", "mean"])
def test_padded_stick(tmp_path, spyre, op):
    path, x = _program(tmp_path, op, (63, 129), (7, 1))
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=-1, keepdims=True)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=5e-2)


def test_max_over_padding_is_refused(tmp_path, spyre):
    path, _ = _program(tmp_path, "max", (63, 129), (1, 1))
    with pytest.raises(ProgramError, match="padded stick"):
        load(path, spyre)


def test_split_reduced_dim_is_refused(tmp_path, spyre):
    path, _ = _program(tmp_path, "sum", (64, 256), (1, 2))
    with pytest.raises(ProgramError, match="reduced dim"):
        load(path, spyre)
