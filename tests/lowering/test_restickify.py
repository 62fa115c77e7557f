"""ReStickifyOpHBM: values survive a change of stick dim (SFU transposes) or of dim order (gathers)."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.lowering.restickify import unique_rows
from spyre_emu.pipeline import load, run
from tests.conftest import card_fp16


def _program(tmp_path, shape, order, slices, dtype="fp16"):
    x = np.random.default_rng(8).standard_normal(shape)
    x = card_fp16(x).astype(np.float16) if dtype == "fp16" else x.astype(np.float32)  # values the card holds
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


def _permute_program(tmp_path, shape, perm, out_shape, slices=None):
    x = card_fp16(np.random.default_rng(9).standard_normal(shape)).astype(np.float16)  # values the card holds
    np.save(tmp_path / "x.npy", x)
    dims = {f"d{i}": n for i, n in enumerate(out_shape)}
    kernel = {"op": "ReStickifyOpHBM", "inputs": ["x"], "outputs": ["y"], "dims": dims,
              "work_division": dict(zip(dims, slices or [1] * len(dims), strict=True)), "attrs": {"perm": list(perm)}}
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": "fp16", "role": "input", "data": "x.npy"},
                        "y": {"shape": list(out_shape), "dtype": "fp16", "role": "output"}},
            "kernels": [kernel]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path, x


@pytest.mark.parametrize(("shape", "perm", "out_shape", "slices", "transposes"), [
    ((2, 64, 3, 64), (0, 2, 1, 3), (6, 64, 64), (3, 2, 1), False),   # heads out of the sequence: gathers
    ((4, 128, 64), (0, 2, 1), (4, 64, 128), (4, 1, 1), True),        # K transposed for attention: blocks
    ((6, 64, 128), (0, 1, 2), (2, 3, 64, 128), (2, 1, 1, 1), False),  # regrouping leading dims
    ((3, 100, 70), (0, 2, 1), (3, 70, 100), (1, 1, 1), True),        # padded both ways
])
def test_permute_and_reshape(tmp_path, spyre, shape, perm, out_shape, slices, transposes):
    path, x = _permute_program(tmp_path, shape, perm, out_shape, slices)
    program = load(path, spyre)
    assert any(i.op == "transpose" for i in program.units.instructions()) == transposes
    got = run(program, spyre, functional=True).outputs["y"]
    np.testing.assert_array_equal(got, x.transpose(perm).reshape(out_shape))


@pytest.mark.parametrize(("shape", "perm", "out_shape", "words"), [
    ((64, 64), (0, 1), (64, 128), r"kernels\[0\].dims: restickify gives x.reshape\(x_shape\)\[window\].permute"),
    ((64, 96), (0, 1), (32, 192), r"kernels\[0\]: an output stick takes different lanes"),
    ((64, 64), (0, 0), (64, 64), r"kernels\[0\].attrs.perm: perm \[0, 0\] is not a permutation"),
])
def test_bad_restickify(tmp_path, spyre, shape, perm, out_shape, words):
    path, _ = _permute_program(tmp_path, shape, perm, out_shape)
    with pytest.raises(ProgramError, match=words):
        load(path, spyre)


def _window_program(tmp_path, shape, window, perm, out_shape):
    path, x = _permute_program(tmp_path, shape, perm, out_shape)
    data = json.loads(path.read_text())
    data["kernels"][0]["attrs"]["window"] = [i for pair in window for i in pair]
    path.write_text(json.dumps(data))
    return path, x


@pytest.mark.parametrize(("shape", "window", "perm", "out_shape", "transposes"), [
    ((16, 256), ((0, 16), (128, 192)), (0, 1), (16, 64), False),       # a stick-aligned column slice: a gather
    ((16, 256), ((0, 16), (192, 256)), (0, 1), (16, 64), False),
    ((2, 10, 3, 64), ((0, 2), (3, 7), (0, 3), (0, 64)), (0, 1, 2, 3), (2, 4, 3, 64), False),  # rows of sticks
    ((16, 96), ((0, 16), (16, 80)), (1, 0), (64, 16), True),           # inside a stick: transposed out
    ((5, 130), ((1, 4), (70, 130)), (1, 0), (60, 3), True),
])
def test_window(tmp_path, spyre, shape, window, perm, out_shape, transposes):
    path, x = _window_program(tmp_path, shape, window, perm, out_shape)
    program = load(path, spyre)
    assert any(i.op == "transpose" for i in program.units.instructions()) == transposes
    got = run(program, spyre, functional=True).outputs["y"]
    part = x[tuple(slice(a, b) for a, b in window)]
    np.testing.assert_array_equal(got, part.transpose(perm).reshape(out_shape))


@pytest.mark.parametrize(("window", "out_shape", "words"), [
    (((0, 16), (16, 80)), (16, 64), r"kernels\[0\]: an output stick takes different lanes"),  # straddles sticks
    (((0, 16), (80, 16)), (16, 64), r"kernels\[0\].attrs.window: window \[0, 16, 80, 16\] is not a start"),
    (((0, 16), (0, 64)), (16, 32), r"kernels\[0\].dims: restickify gives x.reshape\(x_shape\)\[window\]"),
])
def test_bad_window(tmp_path, spyre, window, out_shape, words):
    path, _ = _window_program(tmp_path, (16, 96), window, (0, 1), out_shape)
    with pytest.raises(ProgramError, match=words):
        load(path, spyre)


def _reshaped_program(tmp_path, shape, x_shape, perm, out_shape, slices=None):
    path, x = _permute_program(tmp_path, shape, perm, out_shape, slices)
    data = json.loads(path.read_text())
    data["kernels"][0]["attrs"]["x_shape"] = list(x_shape)
    path.write_text(json.dumps(data))
    return path, x


@pytest.mark.parametrize(("shape", "x_shape", "perm", "out_shape", "slices"), [
    ((16 * 8, 128), (16, 8, 128), (1, 0, 2), (8 * 16, 128), (4, 2)),     # outer transpose of (R, 8, C) held as 2-D
    ((16, 4 * 64), (16, 4, 64), (1, 0, 2), (4, 16, 64), (2, 2, 1)),      # attention's head split, hd 64
    ((6, 8, 64), (2, 3, 8, 64), (1, 0, 2, 3), (3, 2, 8, 64), (3, 1, 1, 1)),
])
def test_x_read_in_another_shape(tmp_path, spyre, shape, x_shape, perm, out_shape, slices):
    """x_shape reads x's elements row-major in a finer shape, x's layout unchanged: one pass of gathers (each
    stick loaded and stored once, no transpose) gives numpy's reshape, permute and reshape."""
    path, x = _reshaped_program(tmp_path, shape, x_shape, perm, out_shape, slices)
    program = load(path, spyre)
    ops = [i for i in program.units.instructions()]
    assert not any(i.op == "transpose" for i in ops)
    sticks = x.size // 64
    assert sum(i.args["bytes"] for i in ops if i.op == "load") == sum(
        i.args["bytes"] for i in ops if i.op == "store") == sticks * 128
    got = run(program, spyre, functional=True).outputs["y"]
    np.testing.assert_array_equal(got, x.reshape(x_shape).transpose(perm).reshape(out_shape))


def test_bad_x_shape(tmp_path, spyre):
    path, _ = _reshaped_program(tmp_path, (16, 128), (16, 4, 64), (1, 0, 2), (4, 16, 64))
    with pytest.raises(ProgramError, match=r"kernels\[0\].attrs.x_shape: x_shape \[16, 4, 64\] does not hold the "
                                           r"input's 2048 elements"):
        load(path, spyre)


def test_a_gather_at_a_constant_stride_is_one_strided_descriptor(tmp_path, spyre):
    """(16 * 8, 128) read as (16, 8, 128), outer dims swapped, on 8 x 2 cores: a core's 16 output rows of one stick
    column are one run (b fixed), from input rows a * 8 + b, one stick 8 sticks apart. In either order it is 16
    one-stick DRAM pieces and one run, so LX keeps the output's order: one load of 16 one-stick pieces, not 16
    loads, and one plain store. 16 loads in all, 1 a core."""
    path, x = _reshaped_program(tmp_path, (16 * 8, 128), (16, 8, 128), (1, 0, 2), (8 * 16, 128), (8, 2))
    program = load(path, spyre)
    loads = [i.args for i in program.units.instructions() if i.op == "load"]
    stores = [i.args for i in program.units.instructions() if i.op == "store"]
    assert len(loads) == len(stores) == 16
    assert all((a["bytes"], a["piece"], a["stride"]) == (16 * 128, 128, 8 * 128) for a in loads)
    assert all(a.keys() == {"dram", "lx", "bytes"} and a["bytes"] == 16 * 128 for a in stores)
    got = run(program, spyre, functional=True).outputs["y"]
    np.testing.assert_array_equal(got, x.reshape(16, 8, 128).transpose(1, 0, 2).reshape(8 * 16, 128))


def test_a_gather_loads_in_input_order_when_that_cuts_fewer_pieces(tmp_path, spyre):
    """The same transpose on 4 x 2 cores: a core's 32 output rows are two runs (b = 2c, 2c + 1), from input rows
    a * 8 + b. In output order that is 32 one-stick loads; in input order, 16 runs of 2 sticks 8 sticks apart
    (one strided load) and two stores, each 16 sticks whole in DRAM whose LX side takes every second slot."""
    path, x = _reshaped_program(tmp_path, (16 * 8, 128), (16, 8, 128), (1, 0, 2), (8 * 16, 128), (4, 2))
    program = load(path, spyre)
    loads = [i.args for i in program.units.instructions() if i.op == "load"]
    stores = [i.args for i in program.units.instructions() if i.op == "store"]
    assert len(loads) == 8
    assert len(stores) == 16
    assert all((a["bytes"], a["piece"], a["stride"]) == (32 * 128, 2 * 128, 8 * 128) for a in loads)
    assert all((a["bytes"], a["lx_piece"], a["lx_stride"]) == (16 * 128, 128, 2 * 128) for a in stores)
    assert sorted(a["lx"] for a in stores) == [0] * 8 + [128] * 8  # the first chunk: input slot a * 2 + (b - 2c)
    got = run(program, spyre, functional=True).outputs["y"]
    np.testing.assert_array_equal(got, x.reshape(16, 8, 128).transpose(1, 0, 2).reshape(8 * 16, 128))


def testunique_rows_is_numpys_unique_over_rows():
    """The transpose planner's row grouping (one lexsort) gives np.unique(axis=0)'s rows, order and inverse."""
    rng = np.random.default_rng(3)
    for _ in range(100):
        a = rng.integers(-1, 4, size=(int(rng.integers(1, 60)), int(rng.integers(1, 6))))
        rows, group = unique_rows(a)
        want_rows, want_group = np.unique(a, axis=0, return_inverse=True)
        np.testing.assert_array_equal(rows, want_rows)
        np.testing.assert_array_equal(group, want_group.reshape(-1))
