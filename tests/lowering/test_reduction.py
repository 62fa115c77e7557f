"""Reductions (keepdim) lowered to SFU ops: values against numpy, divisions, refusals."""

import importlib.util
import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from tests.conftest import ROOT

REFERENCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def _program(tmp_path, op, shape, slices, dim=-1):
    out_shape = [1 if d == dim % len(shape) else n for d, n in enumerate(shape)]
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


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize(("shape", "dim", "slices"), [((512, 1024), 0, (1, 1)), ((63, 129), 0, (1, 3)),
                                                      ((4, 6, 128), 1, (2, 1, 1))])
def test_over_a_dim_outside_the_stick(tmp_path, spyre, op, shape, dim, slices):
    path, x = _program(tmp_path, op, shape, slices, dim)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=dim, keepdims=True)
    tol = 2e-2 * np.sqrt(shape[dim]) if op == "sum" else 1e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=tol)


def test_softmax_over_dim0_through_dram_matches_numpy(tmp_path, spyre):
    """The calibration program's kernel chain (max, sub, exp, sum, realdiv) at a small size."""
    spec = importlib.util.spec_from_file_location("make_calibration",
                                                  ROOT / "examples" / "make_calibration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    data = module.softmax_dim0(96, 320)
    data["tensors"]["x"] = {"shape": [96, 320], "dtype": "fp16", "role": "input", "data": "x.npy"}
    path = tmp_path / "softmax.json"
    path.write_text(json.dumps(data))
    x = np.random.default_rng(19).standard_normal((96, 320)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(0, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(0, keepdims=True), rtol=1e-2, atol=1e-3)
