"""Matmuls whose A or C is an LX tensor: the passes read A, or accumulate C, in the tensor's own place.

Timing rules, each checked exactly against the engine:
- C in LX: the matmul stores nothing; a copy of C to DRAM after it (``identity``, one DMA per core) makes the
  program's cycles those of the matmul that stores C itself, when the matmul stores its one tile in one DMA
  too (one core, one tile): the same instructions on the same units, the store waiting for the same passes.
- A in LX: the matmul loads no A; a copy of A into LX before it (one DMA load per core) makes the cycles those
  of the matmul that loads A itself, when that is one chunk and A is its first load: the load unit runs the
  same descriptors in the same order, and the passes wait for the same last load.
"""

import json

import numpy as np
import pytest

from spyre_emu.config import STICK_BYTES
from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from spyre_emu.unit_program.model import matmul_passes
from tests.conftest import card_fp16
from tests.reference.test_differential import assert_agree


def _t(shape, role, space="dram"):
    return {"shape": list(shape), "dtype": "fp16", "role": role, "space": space}


def _randn(shape, seed):
    return card_fp16(np.random.default_rng(seed).standard_normal(shape) * 0.5).astype(np.float16)


def _write(tmp_path, tensors, kernels, arrays, name="p.json"):
    for key, array in arrays.items():
        np.save(tmp_path / f"{key}.npy", array)
        tensors[key]["data"] = f"{key}.npy"
    path = tmp_path / name
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": kernels}))
    return path


def _mm(name, a, b, c, dims, division):
    return {"name": name, "op": "batchmatmul", "inputs": [a, b], "outputs": [c], "dims": dims,
            "work_division": division}


def _copy(name, x, y, shape, division):
    dims = {f"d{i}": n for i, n in enumerate(shape[:-2])} | {"mb": shape[-2], "out": shape[-1]}
    keys = list(dims)
    return {"name": name, "op": "identity", "inputs": [x], "outputs": [y], "dims": dims,
            "work_division": {keys[-3 if len(shape) == 3 else 0]: division[0], "mb": division[-1]}
            if len(shape) == 3 else {"mb": division[-1]}}


def _ops(program, kernel, op):
    return [ins for stream in program.units.streams.values() for ins in stream
            if ins.kernel == kernel and ins.op == op]


def _tensors(program, kernel, op):
    """The DRAM tensor each of a kernel's ``op`` instructions moves, in order."""
    bufs = program.units.buffers.values()
    return [next(b.name for b in bufs if b.addr <= i.args["dram"] < b.addr + b.nbytes)
            for i in _ops(program, kernel, op)]


def _kernel_ops(program, kernel):
    return {ins.op for stream in program.units.streams.values() for ins in stream if ins.kernel == kernel}


@pytest.mark.parametrize(("m", "k", "n", "steps"), [(64, 128, 64, None), (40, 64, 50, None), (64, 256, 64, 2)])
def test_c_in_lx_then_copied_out_takes_the_cycles_of_the_matmul_that_stores_it(tmp_path, spyre, m, k, n, steps):
    """``steps`` 2: K in two chunks, the second accumulating into C where it stays."""
    a, b = _randn((m, k), 1), _randn((k, n), 2)
    dims = {"mb": m, "in": k, "out": n}
    mm = _mm("mm", "A", "B", "C", dims, {}) | ({"steps": steps} if steps else {})
    lx = _write(tmp_path, {"A": _t((m, k), "input"), "B": _t((k, n), "input"), "C": _t((m, n), "intermediate", "lx"),
                           "Y": _t((m, n), "output")},
                [mm, _copy("out", "C", "Y", (m, n), (1,))], {"A": a, "B": b}, "lx.json")
    dram = _write(tmp_path, {"A": _t((m, k), "input"), "B": _t((k, n), "input"), "Y": _t((m, n), "output")},
                  [mm | {"outputs": ["Y"]}], {"A": a, "B": b}, "dram.json")
    assert steps is None or len(_ops(load(dram, spyre), "mm", "matmul")) >= 4
    p_lx, p_dram = load(lx, spyre), load(dram, spyre)
    assert "store" not in _kernel_ops(p_lx, "mm")
    assert _tensors(p_lx, "out", "store") == ["Y"]
    assert _tensors(p_dram, "mm", "store") == ["Y"]  # one column group: one store of C, as the copy's
    got, want = run(p_lx, spyre, functional=True), run(p_dram, spyre, functional=True)
    assert got.report.data["total_cycles"] == want.report.data["total_cycles"]
    np.testing.assert_array_equal(got.outputs["Y"], want.outputs["Y"])


@pytest.mark.parametrize(("m", "k", "n"), [(64, 64, 128), (40, 50, 64)])
def test_a_in_lx_copied_in_first_takes_the_cycles_of_the_matmul_that_loads_it(tmp_path, spyre, m, k, n):
    a, b = _randn((m, k), 3), _randn((k, n), 4)
    dims = {"mb": m, "in": k, "out": n}
    lx = _write(tmp_path, {"X": _t((m, k), "input"), "A": _t((m, k), "intermediate", "lx"), "B": _t((k, n), "input"),
                           "Y": _t((m, n), "output")},
                [_copy("in", "X", "A", (m, k), (1,)), _mm("mm", "A", "B", "Y", dims, {})], {"X": a, "B": b}, "lx.json")
    dram = _write(tmp_path, {"A": _t((m, k), "input"), "B": _t((k, n), "input"), "Y": _t((m, n), "output")},
                  [_mm("mm", "A", "B", "Y", dims, {})], {"A": a, "B": b}, "dram.json")
    p_lx, p_dram = load(lx, spyre), load(dram, spyre)
    loads = _tensors(p_dram, "mm", "load")
    assert loads[0] == "A"
    assert _tensors(p_lx, "mm", "load") == loads[1:]
    assert "A" not in loads[1:]
    got, want = run(p_lx, spyre, functional=True), run(p_dram, spyre, functional=True)
    assert got.report.data["total_cycles"] == want.report.data["total_cycles"]
    np.testing.assert_array_equal(got.outputs["Y"], want.outputs["Y"])


def _attention(tmp_path, spyre, x, length, division, space="lx", in_place=False):
    """softmax(q kᵀ) v with the scores and probabilities in ``space``: (batch, rows) split alike everywhere;
    ``in_place``: the probabilities written over the scores."""
    d = 64
    q, kt, v = _randn((x, length, d), 5), _randn((x, d, length), 6), _randn((x, length, d), 7)
    tensors = {"q": _t((x, length, d), "input"), "kt": _t((x, d, length), "input"), "v": _t((x, length, d), "input"),
               "s": _t((x, length, length), "intermediate", space), "p": _t((x, length, length), "intermediate", space),
               "y": _t((x, length, d), "output")}
    if in_place:
        tensors["p"]["in_place_of"] = "s"
    split = {"x": division[0], "mb": division[1]}
    kernels = [_mm("qk", "q", "kt", "s", {"x": x, "mb": length, "in": d, "out": length}, split),
               {"name": "softmax", "op": "softmax", "inputs": ["s"], "outputs": ["p"],
                "dims": {"d0": x, "mb": length, "out": length},
                "work_division": {"d0": division[0], "mb": division[1]}},
               _mm("pv", "p", "v", "y", {"x": x, "mb": length, "in": length, "out": d}, split)]
    path = _write(tmp_path, tensors, kernels, {"q": q, "kt": kt, "v": v}, f"{space}{'_in_place' * in_place}.json")
    f = [t.astype(np.float32) for t in (q, kt, v)]
    s = f[0] @ f[1]
    p = np.exp(s - s.max(-1, keepdims=True))
    return load(path, spyre), (p / p.sum(-1, keepdims=True)) @ f[2]


@pytest.mark.parametrize(("x", "length", "division"), [(2, 64, (2, 4)), (3, 128, (3, 2)), (1, 256, (1, 8))])
def test_attention_keeps_scores_and_probabilities_in_lx(tmp_path, spyre, x, length, division):
    program, want = _attention(tmp_path, spyre, x, length, division)
    assert "store" not in _kernel_ops(program, "qk")
    assert set(_tensors(program, "pv", "load")) == {"v"}
    got = run(program, spyre, functional=True).outputs["y"].astype(np.float32)
    np.testing.assert_allclose(got, want, rtol=5e-3, atol=5e-3)
    dram, _ = _attention(tmp_path, spyre, x, length, division, "dram")
    assert run(program, spyre).report.data["total_cycles"] < run(dram, spyre).report.data["total_cycles"]


def test_in_place_passes_follow_the_lx_tensors_layout(tmp_path, spyre):
    """Scores (2, 128, 128) split (x 2, mb 4): core 0 holds batch 0, rows 0-31, both column groups, in device
    order (rows outermost, then the column group), so the pass of rows r.. of group g writes C at (2r + g)
    sticks from the tensor's base, its rows 2 sticks apart; P read as A: a row's 2 K sticks 1 apart, rows 2."""
    program, _ = _attention(tmp_path, spyre, 2, 128, (2, 4))
    qk = [p for ins in _ops(program, "qk", "matmul") if ins.core == 0 for p in matmul_passes(ins.args)]
    assert {p["c_row_stride"] for p in qk} == {2}
    base = min(p["c"] for p in qk)
    want = sorted(2 * r + g for r in (0, 8, 16, 24) for g in (0, 1))
    assert sorted((p["c"] - base) // STICK_BYTES for p in qk) == want
    assert {(i.args["a_k_stride"], i.args["a_row_stride"]) for i in _ops(program, "pv", "matmul")} == {(1, 2)}


def test_b_in_lx_or_split_k_or_a_slice_two_cores_need_is_refused(tmp_path, spyre):
    m, k, n = 64, 128, 128
    t = {"X": _t((m, k), "input"), "A": _t((m, k), "intermediate", "lx"), "B": _t((k, n), "input"),
         "Y": _t((m, n), "output")}
    dims = {"mb": m, "in": k, "out": n}
    for division, match in (({"mb": 2, "in": 2}, "K split"), ({"mb": 2, "out": 2}, "does not hold")):
        path = _write(tmp_path, {**t}, [_copy("in", "X", "A", (m, k), (2,)), _mm("mm", "A", "B", "Y", dims, division)],
                      {})
        with pytest.raises(ProgramError, match=match):
            load(path, spyre)
    t2 = {"A": _t((m, k), "input"), "X": _t((k, n), "input"), "B": _t((k, n), "intermediate", "lx"),
          "Y": _t((m, n), "output")}
    path = _write(tmp_path, t2, [_copy("in", "X", "B", (k, n), (1,)), _mm("mm", "A", "B", "Y", dims, {})], {})
    with pytest.raises(ProgramError, match="matmul B 'B' in LX"):
        load(path, spyre)


def test_a_multicast_waits_until_the_cores_it_feeds_are_done_with_the_kernel_before(tmp_path, spyre):
    """A softmax whose result stays in LX stores nothing; the matmul after it multicasts B (V, one cohort per
    batch) into 8 cores' LX. Each core's first load must wait for the softmax's last instruction on every
    core it feeds, or its multicast overwrites LX a core's softmax still reads (session 45: a masked
    attention of 8 × 8 scores gave wrong values). Rule: the first load starts no earlier than those ends."""
    program, want = _attention(tmp_path, spyre, 4, 8, (4, 8))
    result = run(program, spyre, functional=True, cache=False)
    log = result.log
    done: dict[int, int] = {}
    for i, ins in enumerate(log.instructions):
        if ins.kernel == "softmax":
            done[ins.core] = max(done.get(ins.core, 0), int(log.end[i]))
    multicast = [i for i, ins in enumerate(log.instructions) if ins.kernel == "pv" and ins.op == "load"
                 and len(ins.args.get("to", ())) > 1]
    assert multicast
    for i in multicast:
        assert log.start[i] >= max(done[c] for c in log.instructions[i].args["to"])
    np.testing.assert_allclose(result.outputs["y"].astype(np.float32), want, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize(("x", "length", "division"), [(2, 64, (2, 4)), (4, 8, (4, 8))])
def test_the_reference_simulator_times_attention_in_lx_as_the_engine_does(tmp_path, spyre, x, length, division):
    program, _ = _attention(tmp_path, spyre, x, length, division)
    assert_agree(program.units, spyre)
