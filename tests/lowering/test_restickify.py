"""ReStickifyOpHBM: values survive a change of stick dim (SFU transposes) or of dim order (gathers)."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run


def _program(tmp_path, shape, order, slices, dtype="fp16"):
    x = np.random.default_rng(8).standard_normal(shape).astype(np.float16 if dtype == "fp16" else np.float32)
    np.save(tmp_path / "x.npy", x)
    dims = {f"d{i}": n for i, n in enumerate(shape)}
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": dtype, "role": "input", "data": "x.npy"},
                        "y": {"shape": list(shape), "dtype": dtype, "role": "output",
                              "layout": {"dim_order": list(order)}}},
            "kernels": [{"op": "ReStickifyOpHBM", "inputs": ["x"], "outputs": ["y"], "dims": dims,
                         "work_division": dict(zip(dims, slices, strict=True))}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path, x


@pytest.mark.parametrize(("shape", "order", "slices"), [
    ((128, 256), (1, 0), (2, 4)), ((63, 129), (1, 0), (1, 3)), ((3, 100, 70), (0, 2, 1), (3, 1, 1)),
    ((4, 64, 64), (2, 1, 0), (1, 1, 1)), ((6, 8, 64), (1, 0, 2), (2, 2, 1))])
def test_values_survive(tmp_path, spyre, shape, order, slices):
    path, x = _program(tmp_path, shape, order, slices)
    program = load(path, spyre)
    transposes = [i for i in program.units.instructions() if i.op == "transpose"]
    assert bool(transposes) == (order[-1] != len(shape) - 1)
    np.testing.assert_array_equal(run(program, spyre, functional=True).outputs["y"], x)


def test_fp32_blocks_are_32_lanes(tmp_path, spyre):
    path, x = _program(tmp_path, (64, 96), (1, 0), (1, 1), dtype="fp32")
    program = load(path, spyre)
    assert {i.args["sticks"] for i in program.units.instructions() if i.op == "transpose"} == {32}
    np.testing.assert_array_equal(run(program, spyre, functional=True).outputs["y"], x)


def test_shape_change_is_an_error(tmp_path, spyre):
    path, _ = _program(tmp_path, (64, 64), (1, 0), (1, 1))
    data = json.loads(path.read_text())
    data["tensors"]["y"]["shape"] = [64, 128]
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match="restickify keeps shape and dtype"):
        load(path, spyre)
