"""Reductions (keepdim) lowered to SFU ops: values against numpy, divisions, refusals."""

import json

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from tests.conftest import ROOT, load_script

REFERENCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min}


def _program(tmp_path, op, shape, slices, dim=-1, dtype="fp16"):
    out_shape = [1 if d == dim % len(shape) else n for d, n in enumerate(shape)]
    dims = {f"d{i}": n for i, n in enumerate(shape)}
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": dtype, "role": "input", "data": "x.npy"},
                        "y": {"shape": out_shape, "dtype": dtype, "role": "output"}},
            "kernels": [{"name": "r", "op": op, "inputs": ["x"], "outputs": ["y"], "dims": dims,
                         "work_division": dict(zip(dims, slices, strict=True))}]}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(data))
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32 if dtype == "fp32" else np.float16)
    np.save(tmp_path / "x.npy", x)
    return path, x


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize(("shape", "slices", "dim"), [((63, 129), (7, 1), -1), ((16, 100), (1, 4), 0),
                                                      ((64, 256), (2, 4), -1)])
def test_fp32_values_match_numpy(tmp_path, spyre, op, shape, slices, dim):
    """fp32 rows of 32-element sticks: a padded last stick (129 = 4 x 32 + 1), a reduction over rows,
    and the reduced dim split over a group of cores (partials over the ring), within fp32 rounding."""
    path, x = _program(tmp_path, op, shape, slices, dim, "fp32")
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, REFERENCE[op](x, axis=dim, keepdims=True), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize(("shape", "slices"), [((64, 256), (8, 1)), ((3, 7, 128), (3, 1, 1)),
                                               ((512, 1024), (32, 1)), ((1000, 64), (1, 1))])
def test_values_match_numpy(tmp_path, spyre, op, shape, slices):
    path, x = _program(tmp_path, op, shape, slices)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=-1, keepdims=True)
    tol = 2e-2 * np.sqrt(shape[-1]) if op == "sum" else 1e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=tol)


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_padded_stick(tmp_path, spyre, op):
    path, x = _program(tmp_path, op, (63, 129), (7, 1))
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=-1, keepdims=True)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=5e-2)


@pytest.mark.parametrize("op", sorted(REFERENCE))
def test_padding_written_by_an_earlier_kernel_is_masked(tmp_path, spyre, op):
    """exp writes exp(0) = 1 into the padding lanes; the reduction must not see them."""
    shape = (16, 100)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float16) - np.float16(3)
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": "fp16", "role": "input", "data": "x.npy"},
                        "e": {"shape": list(shape), "dtype": "fp16", "role": "intermediate"},
                        "y": {"shape": [16, 1], "dtype": "fp16", "role": "output"}},
            "kernels": [{"op": "exp", "inputs": ["x"], "outputs": ["e"], "dims": {"a": 16, "b": 100},
                         "work_division": {}},
                        {"op": op, "inputs": ["e"], "outputs": ["y"], "dims": {"a": 16, "b": 100},
                         "work_division": {"a": 2}}]}
    (tmp_path / "p.json").write_text(json.dumps(data))
    np.save(tmp_path / "x.npy", x)
    got = run(load(tmp_path / "p.json", spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    e = np.exp(x.astype(np.float32)).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(got, REFERENCE[op](e, axis=-1, keepdims=True), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize(("shape", "dim", "slices"), [((64, 512), -1, (4, 4)), ((63, 129), -1, (1, 3)),
                                                      ((96, 128), 0, (4, 2)), ((4, 6, 128), 1, (2, 3, 1))])
def test_split_reduced_dim_combines_partials_over_the_ring(tmp_path, spyre, op, shape, dim, slices):
    path, x = _program(tmp_path, op, shape, slices, dim)
    program = load(path, spyre)
    assert any(ins.op == "send" for ins in program.units.instructions())
    got = run(program, spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=dim, keepdims=True)
    tol = 2e-2 * np.sqrt(shape[dim]) if op == "sum" else 1e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=tol)


def test_split_reduction_on_more_cores_finishes_sooner(tmp_path, spyre):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    one, _ = _program(tmp_path / "a", "sum", (32, 8192), (8, 1))
    four, _ = _program(tmp_path / "b", "sum", (32, 8192), (8, 4))
    cycles = [run(load(p, spyre).units, spyre).report.total_cycles for p in (one, four)]
    assert cycles[1] < cycles[0]


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize(("shape", "dim", "slices"), [((512, 1024), 0, (1, 1)), ((63, 129), 0, (1, 3)),
                                                      ((4, 6, 128), 1, (2, 1, 1)),
                                                      ((1100, 64), 0, (1, 1))])  # pieces of 512, 512, 76 rows
def test_over_a_dim_outside_the_stick(tmp_path, spyre, op, shape, dim, slices):
    path, x = _program(tmp_path, op, shape, slices, dim)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    want = REFERENCE[op](x.astype(np.float32), axis=dim, keepdims=True)
    tol = 2e-2 * np.sqrt(shape[dim]) if op == "sum" else 1e-2
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=tol)


def test_softmax_over_dim0_through_dram_matches_numpy(tmp_path, spyre):
    """The calibration program's kernel chain (max, sub, exp, sum, realdiv) at a small size."""
    module = load_script(ROOT / "examples" / "make_calibration.py")
    data = module.softmax_dim0(96, 320)
    data["tensors"]["x"] = {"shape": [96, 320], "dtype": "fp16", "role": "input", "data": "x.npy"}
    path = tmp_path / "softmax.json"
    path.write_text(json.dumps(data))
    x = np.random.default_rng(19).standard_normal((96, 320)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(0, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(0, keepdims=True), rtol=1e-2, atol=1e-3)


def test_two_reduced_dims_are_refused(tmp_path, spyre):
    path, _ = _program(tmp_path, "sum", (64, 256), (1, 1))
    data = json.loads(path.read_text())
    data["tensors"]["y"]["shape"] = [1, 1]
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[0\].outputs: reductions lower over one dim"):
        load(path, spyre)


@pytest.mark.parametrize(("shape", "slices", "dim"), [((64, 8192), (1, 1), -1), ((64, 4100), (2, 1), -1),
                                                      ((32, 16384), (1, 2), -1), ((512, 4096), (1, 32), 0),
                                                      ((2048, 2048), (1, 32), 0)])
def test_folds_follow_the_loads_of_their_positions(tmp_path, spyre, shape, slices, dim):
    """A reduction from DRAM reduces each group of loads (what a DMA unit keeps in flight: positions along the
    stick, output sticks across, or an output stick's rows in pieces of as many when a core has few) as soon as
    it is in LX: the SFUs start before the last load ends, yet no SFU op reads a stick of LX before the load
    that brings it there has ended; the values stay exact (a padded last stick, the reduced dim split over two
    cores, and reductions over rows, one of 2048 rows into one output stick a core, included)."""
    path, x = _program(tmp_path, "max", shape, slices, dim)
    result = run(load(path, spyre), spyre, functional=True)
    np.testing.assert_allclose(result.outputs["y"].astype(np.float32), x.astype(np.float32).max(dim, keepdims=True),
                               rtol=1e-2)
    log = result.log
    for core in range(slices[0] * slices[1]):
        mine = [(i, ins) for i, ins in enumerate(log.instructions) if ins.core == core]
        writes: dict[int, list[tuple[int, int]]] = {}  # LX stick address -> (start, end) of the loads writing it
        for i, ins in mine:
            if ins.op == "load":
                for addr in range(ins.args["lx"], ins.args["lx"] + ins.args["bytes"], 128):
                    writes.setdefault(addr, []).append((log.start[i], log.end[i]))
        folds = [(i, ins) for i, ins in mine if ins.unit.startswith("sfu")]
        assert min(log.start[i] for i, _ in folds) < max(end for w in writes.values() for _, end in w)
        for i, ins in folds:
            for field in ("a", "b"):
                if field in ins.args and not ins.args.get(f"{field}_broadcast"):
                    first, at = ins.args[field], log.start[i]
                    for addr in range(first, first + 128 * ins.args["sticks"], 128):
                        loads = writes.get(addr, [])  # one has ended by then, none is still writing
                        assert not loads or (any(end <= at for _, end in loads)
                                             and not any(start <= at < end for start, end in loads)), (ins.args, addr)
