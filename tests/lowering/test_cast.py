"""to_dtype kernels: casts between fp16 or bf16 and fp32, exact against numpy's astype."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.numerics import from_f32, host_array, to_card, to_f32, to_host
from spyre_emu.pipeline import load, run

BITS = {"fp16": np.float16, "bf16": np.uint16, "fp32": np.float32}


def _program(tmp_path, shape, slices, src, dst):
    dims = {f"d{i}": n for i, n in enumerate(shape)}
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": src, "role": "input", "data": "x.npy"},
                        "y": {"shape": list(shape), "dtype": dst, "role": "output"}},
            "kernels": [{"name": "cast", "op": "to_dtype", "inputs": ["x"], "outputs": ["y"], "dims": dims,
                         "work_division": dict(zip(dims, slices, strict=True))}]}
    path = tmp_path / "cast.json"
    path.write_text(json.dumps(data))
    values = (np.random.default_rng(3).standard_normal(shape) * 300).astype(np.float32)
    x = host_array(values, src)
    np.save(tmp_path / "x.npy", x)
    return path, x


def _f32(array, dtype):
    return to_f32(np.ascontiguousarray(array).reshape(-1).view(np.uint8), dtype).reshape(array.shape)


@pytest.mark.parametrize(("shape", "slices"), [
    ((63, 129), (7, 1)),     # 129 columns: 3 fp16 sticks, 5 fp32 sticks (the last half padding)
    ((16, 32), (4, 1)),      # one fp32 stick a row: half an fp16 stick
    ((3, 7, 100), (3, 1, 1)),
    ((8, 256), (2, 2)),      # the stick dim split: 2 fp16 sticks, 4 fp32 sticks per core
])
@pytest.mark.parametrize(("src", "dst"), [("fp16", "fp32"), ("fp32", "fp16"), ("bf16", "fp32"), ("fp32", "bf16")])
def test_cast_is_exact_as_astype(tmp_path, spyre, shape, slices, src, dst):
    """The card's cast rounds as numerics does (fp16: DLFloat16 on the card, IEEE on the host)."""
    path, x = _program(tmp_path, shape, slices, src, dst)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    held = _f32(to_card(x, src), src)  # what the card holds of x
    want = to_host(from_f32(held.reshape(-1), dst), dst).view(BITS[dst]).reshape(shape)
    np.testing.assert_array_equal(got, want)
    if src == "fp32":
        np.testing.assert_array_equal(to_card(got, dst).reshape(-1).view(np.uint8), from_f32(x.reshape(-1), dst))


def test_cast_costs_one_simple_sfu_step_per_output_stick(tmp_path, spyre):
    """fp16 (64, 128) -> fp32 on one core: 2 x 64 input sticks become 4 x 64 output sticks, each one
    widen_lo or widen_hi of one cycle (a simple op), 256 SFU stick-cycles in all; back, 128."""
    for src, dst, sticks in (("fp16", "fp32", 256), ("fp32", "fp16", 128)):
        path, _ = _program(tmp_path, (64, 128), (1, 1), src, dst)
        program = load(path, spyre)
        sfu = [ins for ins in program.units.instructions() if ins.unit.startswith("sfu")]
        assert {ins.op for ins in sfu} == ({"widen_lo", "widen_hi"} if dst == "fp32" else {"narrow"})
        assert sum(ins.args["sticks"] for ins in sfu) == sticks
        busy = run(program, spyre).report.data["kernels"][0]["units"]["sfu"]["busy_cycles"]
        assert busy == len(sfu) * spyre.sfu.latency_cycles + sticks * spyre.sfu.cost_cycles["simple"]


@pytest.mark.parametrize(("src", "dst", "shape_y"), [("fp16", "fp16", (4, 64)), ("fp32", "fp32", (4, 64)),
                                                     ("fp16", "int8", (4, 64)),
                                                     ("fp16", "fp32", (4, 32))])
def test_refused_casts_name_the_kernel(tmp_path, spyre, src, dst, shape_y):
    path, _ = _program(tmp_path, (4, 64), (1, 1), src, dst)
    data = json.loads(path.read_text())
    data["tensors"]["y"]["shape"] = list(shape_y)
    data["kernels"][0]["dims"] = {"d0": shape_y[0], "d1": shape_y[1]}
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[0\].*to_dtype casts between fp16 or bf16 and fp32"):
        load(path, spyre)
