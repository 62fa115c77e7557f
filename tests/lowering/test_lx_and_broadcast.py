"""Broadcasting inputs (any input, any size-1 dim, the stick dim by splat) and tensors kept in LX."""

import json

import numpy as np
import pytest

from spyre_emu.engine import simulate
from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from tests.conftest import card_fp16
from tests.reference.test_differential import assert_agree


def _write(tmp_path, tensors, kernels, arrays):
    for name, array in arrays.items():
        np.save(tmp_path / f"{name}.npy", array)
        tensors[name]["data"] = f"{name}.npy"
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": kernels}))
    return path


def _t(shape, role, space="dram"):
    return {"shape": list(shape), "dtype": "fp16", "role": role, "space": space}


def _randn(shape, seed):
    """fp16 values the card holds as they are (DLFloat16), so that references start from the same data."""
    return card_fp16(np.random.default_rng(seed).standard_normal(shape)).astype(np.float16)


@pytest.mark.parametrize(("a_shape", "b_shape"), [((1, 129), (63, 129)), ((63, 1), (63, 129)),
                                                  ((63, 129), (1, 1)), ((3, 1, 9), (3, 7, 9)),
                                                  ((1, 7, 1), (3, 7, 9))])
def test_either_input_broadcasts_over_size_one_dims(tmp_path, spyre, a_shape, b_shape):
    out = np.broadcast_shapes(a_shape, b_shape)
    a, b = _randn(a_shape, 1), _randn(b_shape, 2)
    dims = {f"d{i}": n for i, n in enumerate(out)}
    division = {"d0": 3} if out[0] % 3 == 0 else {}
    path = _write(tmp_path, {"a": _t(a_shape, "input"), "b": _t(b_shape, "input"), "y": _t(out, "output")},
                  [{"op": "sub", "inputs": ["a", "b"], "outputs": ["y"], "dims": dims, "work_division": division}],
                  {"a": a, "b": b})
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    np.testing.assert_allclose(got.astype(np.float32), card_fp16(a.astype(np.float32) - b), atol=2e-3)


@pytest.mark.parametrize(("a_shape", "b_shape", "division"), [
    ((4, 1, 64), (48, 8, 64), {"d0": 4, "d1": 2}),   # a (B, 1, L) mask over (B·H, rows, L): 12 heads a batch
    ((6, 3, 1), (12, 3, 130), {"d0": 3}),            # and over its rows, splatted along the stick
    ((2, 5, 64), (6, 5, 64), {"d1": 5}),             # the whole rows of each position repeated
])
def test_an_input_dim_dividing_the_outputs_covers_consecutive_positions(tmp_path, spyre, a_shape, b_shape, division):
    """n positions of an input dim over m of the output (n divides m): output index h reads h // (m / n), as a
    key-padding mask (B, 1, L) reads over scores whose batch and heads are one dim."""
    out = tuple(max(a, b) for a, b in zip(a_shape, b_shape, strict=True))
    a, b = _randn(a_shape, 1), _randn(b_shape, 2)
    dims = {f"d{i}": n for i, n in enumerate(out)}
    path = _write(tmp_path, {"a": _t(a_shape, "input"), "b": _t(b_shape, "input"), "y": _t(out, "output")},
                  [{"op": "add", "inputs": ["a", "b"], "outputs": ["y"], "dims": dims, "work_division": division}],
                  {"a": a, "b": b})
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    wide = np.broadcast_to(np.repeat(a, out[0] // a_shape[0], axis=0), out).astype(np.float32)
    np.testing.assert_allclose(got, card_fp16(wide + b), atol=2e-3)


def test_a_dividing_input_loads_its_own_sticks_once_exact_cycles(tmp_path, tiny):
    """y (4, 64) = a (2, 64) with each row covering two (identity) on one core of configs/tiny.toml (rules:
    docs/unit-program.md; DRAM figures: tests/engine/test_dram.py, the same buffers as test_concat's exact test).
    a at 0 (channel 0, bank 0, row 0), y at 4096 (sticks 0-1 in channel 0, 2-3 in channel 1: row index 2, bank
    1, row 1). Load a's 2 sticks (not 4): request at mc0 at 4, ACT 4, column 14, data 19..27, the last stick
    back at 31, done 32. Each corelet's SFU copies 2 sticks from one a stick (a broadcast operand): 32 + latency
    4 + 2 = 38. The store's 4 sticks leave LX at 38..41, reach mc0 at 42..45; channel 0's two (42, 43): ACT bank
    1 at 43, column 53, data 56..64; channel 1's (44, 45): ACT 45, column 55, data 58..66: done 66."""
    path = _write(tmp_path, {"a": _t((2, 64), "input"), "y": _t((4, 64), "output")},
                  [{"op": "identity", "inputs": ["a"], "outputs": ["y"], "dims": {"mb": 4, "out": 64},
                    "work_division": {}}], {})
    units = load(path, tiny).units
    assert [units.buffers[n].addr for n in ("a", "y")] == [0, 4096]
    log = simulate(units, tiny)
    got = sorted((i.unit, i.args.get("bytes", i.args.get("sticks")), int(s), int(e))
                 for i, s, e in zip(log.instructions, log.start, log.end, strict=True))
    assert got == [("load", 256, 0, 32), ("sfu0", 2, 32, 38), ("sfu1", 2, 32, 38), ("store", 512, 38, 66)]
    assert log.total_cycles == 66
    assert_agree(units, tiny)


@pytest.mark.parametrize(("a_shape", "words"), [
    ((5, 1, 64), r"input 'a' \(\[5, 1, 64\] fp16\) does not broadcast"),   # 5 does not divide 48
    ((48, 8, 32), r"input 'a' \(\[48, 8, 32\] fp16\) does not broadcast"),  # the stick dim: equal or 1 only
])
def test_an_input_dim_that_does_not_divide_the_outputs_is_an_error(tmp_path, spyre, a_shape, words):
    out = (48, 8, 64)
    path = _write(tmp_path, {"a": _t(a_shape, "input"), "b": _t(out, "input"), "y": _t(out, "output")},
                  [{"op": "add", "inputs": ["a", "b"], "outputs": ["y"], "dims": {"x": 48, "mb": 8, "out": 64},
                    "work_division": {}}], {})
    with pytest.raises(ProgramError, match=r"kernels\[0\]\.inputs\[0\]: " + words):
        load(path, spyre)


def test_layernormnorm_with_broadcast_statistics_and_affine(tmp_path, spyre):
    m, n = 40, 200
    x, mean, rstd = _randn((m, n), 1), _randn((m, 1), 2), np.abs(_randn((m, 1), 3)) + np.float16(0.5)
    w, b = _randn((1, n), 4), _randn((1, n), 5)
    tensors = {"x": _t((m, n), "input"), "mean": _t((m, 1), "input"), "rstd": _t((m, 1), "input"),
               "w": _t((1, n), "input"), "b": _t((1, n), "input"), "y": _t((m, n), "output")}
    kernels = [{"op": "layernormnorm", "inputs": ["x", "mean", "rstd", "w", "b"], "outputs": ["y"],
                "dims": {"mb": m, "out": n}, "work_division": {"mb": 4, "out": 2}}]
    path = _write(tmp_path, tensors, kernels, {"x": x, "mean": mean, "rstd": rstd, "w": w, "b": b})
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    f = [v.astype(np.float32) for v in (x, mean, rstd, w, b)]
    np.testing.assert_allclose(got, (f[0] - f[1]) * f[2] * f[3] + f[4], rtol=5e-3, atol=5e-3)


def _chain(tmp_path, space, division2=None):
    """y = exp(x + 1) - x with the two intermediates in ``space``."""
    shape = (64, 256)
    x, one = _randn(shape, 7), np.ones((1, 1), np.float16)
    tensors = {"x": _t(shape, "input"), "one": _t((1, 1), "constant"), "s": _t(shape, "intermediate", space),
               "e": _t(shape, "intermediate", space), "y": _t(shape, "output")}
    dims = {"mb": 64, "out": 256}
    kernels = [{"name": "add", "op": "add", "inputs": ["x", "one"], "outputs": ["s"], "dims": dims,
                "work_division": {"mb": 8, "out": 2}},
               {"name": "exp", "op": "exp", "inputs": ["s"], "outputs": ["e"], "dims": dims,
                "work_division": division2 or {"mb": 8, "out": 2}},
               {"name": "sub", "op": "sub", "inputs": ["e", "x"], "outputs": ["y"], "dims": dims,
                "work_division": {"mb": 8, "out": 2}}]
    return _write(tmp_path, tensors, kernels, {"x": x, "one": one}), x


@pytest.mark.parametrize("space", ["dram", "lx"])
def test_chain_through_dram_or_lx_gives_the_same_values(tmp_path, spyre, space):
    path, x = _chain(tmp_path, space)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    f = x.astype(np.float32)
    np.testing.assert_allclose(got, card_fp16(np.exp(card_fp16(f + 1))) - f, rtol=5e-3, atol=5e-3)


def test_lx_intermediates_skip_dram_and_finish_sooner(tmp_path, spyre):
    (tmp_path / "d").mkdir()
    (tmp_path / "l").mkdir()
    dram, _ = _chain(tmp_path / "d", "dram")
    lx, _ = _chain(tmp_path / "l", "lx")
    via_dram, via_lx = (load(p, spyre).units for p in (dram, lx))
    assert {"s", "e"} <= set(via_dram.buffers)
    assert not {"s", "e"} & set(via_lx.buffers)
    loads = [sum(1 for i in u.instructions() if i.op == "load") for u in (via_dram, via_lx)]
    assert loads[1] < loads[0]
    assert run(via_lx, spyre).report.total_cycles < run(via_dram, spyre).report.total_cycles


def test_lx_tensor_read_with_another_division_is_an_error(tmp_path, spyre):
    path, _ = _chain(tmp_path, "lx", division2={"mb": 16})
    with pytest.raises(ProgramError, match=r"kernels\[1\].*LX tensor 's': core 0 does not hold the sticks"):
        load(path, spyre)


def test_lx_overflow_names_the_tensor(tmp_path, spyre):
    shape = (2048, 1024)  # 4 MB of fp16 on one core: far beyond 2 MB of LX
    tensors = {"x": _t(shape, "input"), "s": _t(shape, "intermediate", "lx"), "y": _t(shape, "output")}
    dims = {"mb": 2048, "out": 1024}
    kernels = [{"op": "exp", "inputs": ["x"], "outputs": ["s"], "dims": dims, "work_division": {}},
               {"op": "neg", "inputs": ["s"], "outputs": ["y"], "dims": dims, "work_division": {}}]
    path = _write(tmp_path, tensors, kernels, {})
    with pytest.raises(ProgramError, match=r"kernels\[0\].outputs: LX overflow: tensor 's' needs 4194304 B"):
        load(path, spyre)


def test_tensor_used_before_it_is_written(tmp_path, spyre):
    tensors = {"x": _t((8, 64), "input"), "s": _t((8, 64), "intermediate"), "y": _t((8, 64), "output")}
    dims = {"mb": 8, "out": 64}
    kernels = [{"op": "add", "inputs": ["x", "s"], "outputs": ["y"], "dims": dims, "work_division": {}},
               {"op": "exp", "inputs": ["x"], "outputs": ["s"], "dims": dims, "work_division": {}}]
    with pytest.raises(ProgramError, match=r"kernels\[0\].inputs\[1\]: tensor 's' is used before it is written"):
        load(_write(tmp_path, tensors, kernels, {}), spyre)


def softmax_program(m, n, space, cores):
    """torch-spyre's softmax chain (identity, max, sub, exp, sum, realdiv) with intermediates in ``space``."""
    t = {"x": _t((m, n), "input"), "y": _t((m, n), "output")}
    t |= {name: _t((m, 1) if name in ("mx", "z") else (m, n), "intermediate", space) for name in ("c", "mx", "s",
                                                                                                "e", "z")}
    dims, division = {"mb": m, "out": n}, {"mb": cores}
    chain = [("identity", ["x"], "c"), ("max", ["c"], "mx"), ("sub", ["c", "mx"], "s"), ("exp", ["s"], "e"),
             ("sum", ["e"], "z"), ("realdiv", ["e", "z"], "y")]
    kernels = [{"name": f"k{i}_{op}", "op": op, "inputs": ins, "outputs": [out], "dims": dims,
                "work_division": division} for i, (op, ins, out) in enumerate(chain)]
    return t, kernels


@pytest.mark.parametrize("space", ["dram", "lx"])
@pytest.mark.parametrize("n", [256, 200])
def test_softmax_chain_in_lx_or_dram_matches_numpy(tmp_path, spyre, space, n):
    x = _randn((64, n), 11)
    path = _write(tmp_path, *softmax_program(64, n, space, 4), {"x": x})
    got = run(load(path, spyre), spyre, functional=True).outputs["y"].astype(np.float32)
    e = np.exp(x.astype(np.float32) - x.astype(np.float32).max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-2, atol=1e-3)


def test_softmax_with_lx_planning_is_faster(tmp_path, spyre):
    cycles = {}
    for space in ("dram", "lx"):
        (tmp_path / space).mkdir()
        path = _write(tmp_path / space, *softmax_program(512, 1024, space, 32), {})
        cycles[space] = run(load(path, spyre), spyre).report.total_cycles
    print(cycles)
    assert cycles["lx"] < cycles["dram"]


def test_placement_fixes_dram_addresses_and_lx_offsets(tmp_path, spyre):
    path, x = _chain(tmp_path, "lx")
    data = json.loads(path.read_text())
    data["tensors"]["x"]["dram_address"] = 1 << 30
    data["tensors"]["e"]["lx_offset"] = 512 * 1024
    path.write_text(json.dumps(data))
    program = load(path, spyre)
    assert program.units.buffers["x"].addr == 1 << 30
    assert program.units.buffers["one"].addr == 0  # the others are still allocated from 0
    writes = [i for i in program.units.instructions() if i.kernel == "exp" and i.op == "exp"]
    assert min(i.args["out"] for i in writes) == 512 * 1024
    got = run(program, spyre, functional=True).outputs["y"].astype(np.float32)
    f = x.astype(np.float32)
    np.testing.assert_allclose(got, card_fp16(np.exp(card_fp16(f + 1))) - f, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize(("tensor", "field", "value", "words"), [
    ("e", "lx_offset", 64, r"tensors.e.lx_offset: lx_offset 64 is not a multiple of 128"),
    ("x", "lx_offset", 4096, r"tensors.x.lx_offset: lx_offset places a tensor in lx; this one is in dram"),
    ("e", "lx_offset", 0, r"kernels\[1\].outputs: LX overflow: tensor 'e' needs 2048 B per core at its lx_offset"),
    ("e", "lx_offset", 1_700_000 // 128 * 128, r"LX overflow: tensor 'e'.*at its lx_offset"),
])
def test_bad_placement(tmp_path, spyre, tensor, field, value, words):
    path, _ = _chain(tmp_path, "lx")
    data = json.loads(path.read_text())
    data["tensors"][tensor][field] = value
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=words):
        load(path, spyre)


def test_pinned_lx_tensor_may_not_overlap_a_live_one(tmp_path, spyre):
    path, _ = _chain(tmp_path, "lx")
    data = json.loads(path.read_text())
    data["tensors"]["s"]["lx_offset"] = 1 << 20
    data["tensors"]["e"]["lx_offset"] = (1 << 20) + 1024  # s holds 2048 B per core
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[1\].outputs: LX tensor 'e' at its lx_offset overlaps 's'"):
        load(path, spyre)


def _copies(tmp_path, cores):
    """y = -x through LX: x cloned into LX, negated there, copied back out (identity both ways)."""
    shape, dims = (64, 256), {"mb": 64, "out": 256}
    tensors = {"x": _t(shape, "input"), "c": _t(shape, "intermediate", "lx"), "d": _t(shape, "intermediate", "lx"),
               "y": _t(shape, "output")}
    kernels = [{"name": name, "op": op, "inputs": [a], "outputs": [b], "dims": dims, "work_division": {"mb": cores}}
               for name, op, a, b in (("in", "identity", "x", "c"), ("neg", "neg", "c", "d"),
                                      ("out", "identity", "d", "y"))]
    x = _randn(shape, 3)
    return _write(tmp_path, tensors, kernels, {"x": x}), x


@pytest.mark.parametrize("cores", [1, 4])
def test_a_copy_between_dram_and_lx_is_one_dma_transfer(tmp_path, spyre, cores):
    """identity from DRAM into an LX tensor of the same layout is one load per core, out of LX one store:
    no SFU pass (docs/decisions/sfu.md); the values come through."""
    path, x = _copies(tmp_path, cores)
    program = load(path, spyre)
    share = 64 * 256 * 2 // cores
    for kernel, unit in (("in", "load"), ("out", "store")):
        moves = [i for i in program.units.instructions() if i.kernel == kernel]
        assert sorted((i.core, i.unit, i.args["bytes"]) for i in moves) == [(c, unit, share) for c in range(cores)]
    np.testing.assert_array_equal(run(program, spyre, functional=True).outputs["y"], -x)


def test_the_clone_into_lx_takes_what_its_load_takes(tmp_path, spyre, run_units):
    """Exact cycles: the lowered clone is the hand-written single load of the same bytes to the same place."""
    (tmp_path / "p").mkdir()
    path, _ = _copies(tmp_path / "p", 1)
    data = json.loads(path.read_text())
    data["kernels"] = data["kernels"][:1]
    data["tensors"]["c"]["role"] = "output"  # the clone alone
    data["tensors"]["c"]["space"] = "lx"
    lowered = load(_write(tmp_path, data["tensors"], data["kernels"], {}), spyre).units
    (ins,) = lowered.instructions()
    by_hand = {0: {"load": [{"op": "load", "dram": "x", "lx": ins.args["lx"], "bytes": 64 * 256 * 2}]}}
    buffers = {"x": {"bytes": 64 * 256 * 2, "addr": lowered.buffers["x"].addr}}
    assert run(lowered, spyre).log.total_cycles == run_units(spyre, by_hand, buffers).total_cycles


@pytest.mark.parametrize(("rows", "chunks"), [(64, 1), (1536, 3)])
def test_an_input_every_core_reads_alike_is_multicast(tmp_path, spyre, rows, chunks):
    """y (rows, 256) = a + b (rows, 1), the 4 stick columns over 4 cores: each core needs all of b's sticks (lane 0
    splatted), the same ones chunk by chunk (512 sticks, what a load unit keeps in flight), so core 0 loads each
    chunk's once into every core's LX and the others load none; DRAM reads a and b once (b 4 times when each core
    loaded its own); values exact; the simpy reference agrees (with 3 chunks the second buffer is reused)."""
    a, b = _randn((rows, 256), 1), _randn((rows, 1), 2)
    path = _write(tmp_path, {"a": _t((rows, 256), "input"), "b": _t((rows, 1), "input"),
                             "y": _t((rows, 256), "output")},
                  [{"op": "add", "inputs": ["a", "b"], "outputs": ["y"], "dims": {"mb": rows, "out": 256},
                    "work_division": {"out": 4}}], {"a": a, "b": b})
    units = load(path, spyre).units
    at = units.buffers["b"].addr
    b_loads = [(i.core, i.args.get("to")) for i in units.instructions() if i.unit == "load"
               and at <= i.args["dram"] < at + rows * 128]
    assert b_loads == [(0, (0, 1, 2, 3))] * chunks
    result = run(load(path, spyre), spyre, functional=True)
    assert result.report.data["dram"]["read_bytes"] == a.nbytes + rows * 128
    np.testing.assert_allclose(result.outputs["y"].astype(np.float32), card_fp16(a.astype(np.float32) + b), atol=2e-3)
    assert_agree(units, spyre)
