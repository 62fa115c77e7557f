"""Row-wise kernels (softmax, layernorm, rmsnorm, layernormscale) against numpy, padded and split."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run


def _reference(op, x, w, b, eps):
    x = x.astype(np.float32)
    if op == "softmax":
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    if op == "rmsnorm":
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w
    var = x.var(-1, keepdims=True)
    if op == "layernormscale":
        return 1 / np.sqrt(var + eps)
    return (x - x.mean(-1, keepdims=True)) / np.sqrt(var + eps) * w + b


def _program(tmp_path, op, shape, slices, space="dram", eps=1e-5, dtype="fp16", dim_order=None):
    n, host = shape[-1], np.float32 if dtype == "fp32" else np.float16
    rng = np.random.default_rng(4)
    arrays = {"x": rng.standard_normal(shape).astype(host),
              "w": rng.uniform(0.5, 1.5, n).astype(host), "b": rng.standard_normal(n).astype(host)}
    params = {"softmax": [], "layernormscale": [], "rmsnorm": ["w"], "layernorm": ["w", "b"]}[op]
    y_shape = [*shape[:-1], 1] if op == "layernormscale" else list(shape)
    tensors = {"x": {"shape": list(shape), "dtype": dtype, "role": "input", "data": "x.npy"},
               "y": {"shape": y_shape, "dtype": dtype, "role": "output"}}
    if dim_order is not None:
        for t in ("x", "y"):
            tensors[t]["layout"] = {"dim_order": list(dim_order)}
    tensors |= {p: {"shape": [n], "dtype": dtype, "role": "constant", "data": f"{p}.npy"} for p in params}
    kernels = [{"op": op, "inputs": ["x", *params], "outputs": ["y"], "dims": {f"d{i}": s for i, s in enumerate(shape)},
                "work_division": {f"d{i}": s for i, s in enumerate(slices)}}]
    if op != "softmax":
        kernels[0]["attrs"] = {"eps": eps}
    if space == "lx":  # the row-wise kernel reads an LX copy of x and writes y to LX, then a copy to DRAM
        tensors["xl"] = {**tensors["x"], "role": "intermediate", "space": "lx"}
        tensors["yl"] = {**tensors["y"], "role": "intermediate", "space": "lx"}
        tensors["xl"].pop("data")
        copy = {"dims": kernels[0]["dims"], "work_division": kernels[0]["work_division"]}
        kernels = [{"op": "identity", "inputs": ["x"], "outputs": ["xl"], **copy},
                   {**kernels[0], "inputs": ["xl", *params], "outputs": ["yl"]},
                   {"op": "identity", "inputs": ["yl"], "outputs": ["y"], "dims": {f"d{i}": s for i, s in
                                                                                   enumerate(y_shape)},
                    "work_division": kernels[0]["work_division"]}]
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": kernels}))
    return path, arrays


OPS = ["softmax", "layernorm", "rmsnorm", "layernormscale"]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize(("shape", "slices"), [((64, 256), (8, 1)), ((63, 129), (7, 1)), ((3, 5, 100), (3, 1, 1))])
def test_values_match_numpy(tmp_path, spyre, op, shape, slices):
    path, a = _program(tmp_path, op, shape, slices)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    want = _reference(op, a["x"], a["w"].astype(np.float32), a["b"].astype(np.float32), 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("op", OPS)
def test_fp32_values_match_numpy(tmp_path, spyre, op):
    """fp32 rows of 129 (five 32-element sticks, the last padded), within fp32 rounding."""
    path, a = _program(tmp_path, op, (63, 129), (7, 1), dtype="fp32")
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, _reference(op, a["x"], a["w"], a["b"], 1e-5), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", OPS)
def test_operands_in_lx(tmp_path, spyre, op):
    path, a = _program(tmp_path, op, (32, 192), (4, 1), space="lx")
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    want = _reference(op, a["x"], a["w"].astype(np.float32), a["b"].astype(np.float32), 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


def test_layernorm_costs_one_pass_over_dram(tmp_path, spyre):
    """A fused layer norm reads x once and writes y once (plus weight, bias and constants per core)."""
    path, _ = _program(tmp_path, "layernorm", (512, 1024), (32, 1))
    dram = run(load(path, spyre).units, spyre).report.data["dram"]
    x_bytes = 512 * 1024 * 2
    assert dram["write_bytes"] == x_bytes
    assert dram["read_bytes"] == x_bytes + 32 * (2 * 1024 * 2 + 5 * 128)


def test_splitting_a_row_is_an_error(tmp_path, spyre):
    path, _ = _program(tmp_path, "softmax", (64, 256), (1, 2))
    with pytest.raises(ProgramError, match=r"work_division.d1: row-wise kernels keep each row on one core"):
        load(path, spyre)


def test_unknown_attribute_is_an_error(tmp_path, spyre):
    path, _ = _program(tmp_path, "layernorm", (8, 64), (1, 1))
    data = json.loads(path.read_text())
    data["kernels"][0]["attrs"] = {"epsilon": 1e-5}
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[0\].attrs.epsilon: layernorm takes no attribute 'epsilon'"):
        load(path, spyre)


def _safe_softmax_program(tmp_path, safe):
    """Softmax over rows of 100 (a padded last stick): row 0 all -inf, row 1 -inf but one entry."""
    path, a = _program(tmp_path, "softmax", (16, 100), (2, 1))
    x = a["x"].copy()
    x[0] = -np.inf
    x[1, 1:] = -np.inf
    np.save(tmp_path / "x.npy", x)
    data = json.loads(path.read_text())
    data["kernels"][0]["attrs"] = {"safe": safe}
    path.write_text(json.dumps(data))
    return path, x


def test_safe_softmax_gives_zeros_for_rows_of_minus_infinity(tmp_path, spyre):
    """As torch's attention does: a fully masked row is 0; every other row is the plain softmax."""
    path, x = _safe_softmax_program(tmp_path, True)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    assert not got[0].any()
    np.testing.assert_array_equal(got[1], np.eye(100)[0])
    np.testing.assert_allclose(got[2:], _reference("softmax", x[2:], None, None, 0), rtol=1e-2, atol=1e-2)
    plain = run(load(_safe_softmax_program(tmp_path, False)[0], spyre), spyre, functional=True).outputs["y"]
    assert not np.isfinite(plain[0]).any()  # IEEE's NaN (-inf minus -inf) is the card's NINF: read as -inf
    np.testing.assert_array_equal(plain[1:], got[1:].astype(np.float16))


def test_safe_softmax_costs_two_sfu_ops_per_pass(tmp_path, spyre):
    """The clamps of the row max and the row sum: one SFU op each per corelet and chunk of rows."""
    def sfu_ops(safe):
        units = load(_safe_softmax_program(tmp_path, safe)[0], spyre).units
        return sum(ins.unit.startswith("sfu") for ins in units.instructions())
    chunks_times_corelets = 2 * 2  # 2 cores, each one chunk of 8 rows on both corelets
    assert sfu_ops(True) - sfu_ops(False) == 2 * chunks_times_corelets


@pytest.mark.parametrize("op", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize(("shape", "slices", "space"), [((3, 5, 100), (3, 1, 1), "dram"),
                                                        ((4, 40, 130), (2, 4, 1), "lx")])
def test_batch_outer_rows_match_numpy(tmp_path, spyre, op, shape, slices, space):
    """x and y laid out batch-outer (dim_order [1, 0, 2], each batch a 2-D block, as an attention tile's scores
    can be): the rows are found through the layout, the values are numpy's."""
    path, a = _program(tmp_path, op, shape, slices, space=space, dim_order=(1, 0, 2))
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    want = _reference(op, a["x"], a["w"].astype(np.float32), a["b"].astype(np.float32), 1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize(("dim_order", "pieces"), [((0, 1, 2), [1] * 128), ((1, 0, 2), [32] * 4)])
def test_a_core_reads_its_batch_as_the_layout_holds_it(tmp_path, spyre, dim_order, pieces):
    """Softmax of (4, 64, 256) on 8 cores, a core's share one batch's 32 rows of 4 sticks. The default layout holds a
    row's stick of every batch side by side (rows, column stick, batch): the core loads 128 one-stick pieces.
    Batch-outer holds a batch's column stick of every row in a run: 4 pieces of 32 sticks."""
    path, _ = _program(tmp_path, "softmax", (4, 64, 256), (4, 2, 1), dim_order=dim_order)
    loads = [i for i in load(path, spyre).units.instructions() if i.op == "load" and i.core == 0
             and i.args["bytes"] > 128 * 8]  # x's, not the constants'
    got = [i.args.get("piece", i.args["bytes"]) // 128 for i in loads
           for _ in range(i.args["bytes"] // i.args.get("piece", i.args["bytes"]))]
    assert got == pieces


def test_a_batch_outer_x_needs_a_batch_outer_y(tmp_path, spyre):
    path, _ = _program(tmp_path, "softmax", (3, 5, 100), (3, 1, 1), dim_order=(1, 0, 2))
    data = json.loads(path.read_text())
    del data["tensors"]["y"]["layout"]
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"softmax takes x"):
        load(path, spyre)



def test_a_core_takes_its_rows_in_the_order_x_holds_them(tmp_path, spyre):
    """Softmax of (8, 128, 257) in LX on one core. Batch-outer x holds a column stick of a head's 128 rows in a run;
    the core takes its rows head by head, so an SFU op covers a run of a head's rows: 155 exp ops on the two SFUs,
    against 745 in the default layout (taken row by row across the heads, as the default holds them, each op
    covered one stick of batch-outer x: 1,024 rows x 5 sticks = 5,120)."""
    def exps(order, name):
        (tmp_path / name).mkdir()
        path, _ = _program(tmp_path / name, "softmax", (8, 128, 257), (1, 1, 1), space="lx", dim_order=order)
        return sum(i.op == "exp" for i in load(path, spyre).units.instructions())
    assert exps((1, 0, 2), "outer") < exps(None, "default")
