"""cat: y = cat(inputs, dim) on the card, DMA only: whole input sticks gathered into the output's."""

import json
import re

import numpy as np
import pytest

from spyre_emu import reference
from spyre_emu.cli import main
from spyre_emu.engine import simulate
from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from tests.conftest import card_fp16

STICK = 128


def _program(tmp_path, shapes, dim, slices=None, dtypes=None, out=None, seed=5):
    """A cat of inputs of ``shapes`` along ``dim``; ``out`` overrides the output's shape (refusals)."""
    rng = np.random.default_rng(seed)
    dtypes = dtypes or ["fp16"] * len(shapes)
    xs = [card_fp16(rng.standard_normal(s)).astype(np.float16 if t == "fp16" else np.float32)
          for s, t in zip(shapes, dtypes, strict=True)]
    tensors = {}
    for i, (x, t) in enumerate(zip(xs, dtypes, strict=True)):
        np.save(tmp_path / f"x{i}.npy", x)
        tensors[f"x{i}"] = {"shape": list(x.shape), "dtype": t, "role": "input", "data": f"x{i}.npy"}
    shape = out or [sum(s[dim] for s in shapes) if d == dim else n for d, n in enumerate(shapes[0])]
    tensors["y"] = {"shape": shape, "dtype": dtypes[0], "role": "output"}
    dims = {f"d{i}": n for i, n in enumerate(shape)}
    kernel = {"op": "cat", "inputs": list(tensors)[:-1], "outputs": ["y"], "dims": dims,
              "work_division": dict(zip(dims, slices or [1] * len(dims), strict=True)), "attrs": {"dim": dim}}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    return path, xs


@pytest.mark.parametrize(("shapes", "dim", "slices"), [
    ([(3, 100), (5, 100)], 0, (1, 1)),                      # uneven sizes, padding in the last stick
    ([(3, 64), (1, 64), (12, 64)], 0, (4, 1)),              # three inputs, a core's share across two
    ([(2, 3, 70), (2, 4, 70)], 1, (2, 1, 1)),               # 3-D, a middle dim
    ([(1, 5, 130), (3, 5, 130), (2, 5, 130)], 0, (2, 5, 3)),  # 3-D, dim 0, three sticks a row, 30 cores
    ([(4, 128), (4, 64)], 1, (2, 3)),                       # along the stick dim, whole sticks
    ([(2, 3, 64), (2, 3, 192), (2, 3, 30)], 2, (2, 1, 1)),  # along the stick dim, the last input padded
])
def test_matches_numpy(tmp_path, spyre, shapes, dim, slices):
    path, xs = _program(tmp_path, shapes, dim, slices)
    program = load(path, spyre)
    assert {i.op for i in program.units.instructions()} == {"load", "store"}
    np.testing.assert_array_equal(run(program, spyre, functional=True).outputs["y"], np.concatenate(xs, dim))


def test_inputs_in_other_layouts(tmp_path, spyre):
    """Any layouts with y's stick dim: an input whose outer dims are in another order is still gathered."""
    path, xs = _program(tmp_path, [(2, 3, 70), (2, 5, 70)], 1, (2, 1, 1))
    data = json.loads(path.read_text())
    data["tensors"]["x1"]["layout"] = {"dim_order": [1, 0, 2]}
    path.write_text(json.dumps(data))
    np.testing.assert_array_equal(run(load(path, spyre), spyre, functional=True).outputs["y"], np.concatenate(xs, 1))


def test_an_input_with_another_stick_dim_is_refused(tmp_path, spyre):
    path, _ = _program(tmp_path, [(64, 64), (64, 64)], 0)
    data = json.loads(path.read_text())
    data["tensors"]["x1"]["layout"] = {"dim_order": [1, 0]}
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[0\]\.inputs: output stick \d+ is not one input stick lane"):
        load(path, spyre)


def test_fp32_sticks_are_32_lanes(tmp_path, spyre):
    """fp32 along the stick dim: a first input of 32 elements is one whole stick."""
    path, xs = _program(tmp_path, [(4, 32), (4, 40)], 1, dtypes=["fp32", "fp32"])
    np.testing.assert_array_equal(run(load(path, spyre), spyre, functional=True).outputs["y"], np.concatenate(xs, 1))


def test_one_dma_per_run_consecutive_in_input_output_and_lx(tmp_path, spyre):
    """y = cat([x0 (3, 64), x1 (5, 64)]) on one core: output sticks 0..7 are x0's 0..2 then x1's 0..4,
    so two loads (3 and 5 sticks, side by side in LX) and one store of all 8."""
    path, _ = _program(tmp_path, [(3, 64), (5, 64)], 0)
    units = load(path, spyre).units
    got = [(i.op, i.args["dram"] - units.buffers[n].addr, i.args["lx"], i.args["bytes"])
           for i, n in zip(units.instructions(), ("x0", "x1", "y"), strict=True)]
    assert got == [("load", 0, 0, 3 * STICK), ("load", 0, 3 * STICK, 5 * STICK), ("store", 0, 0, 8 * STICK)]


def test_exact_cycles_on_the_tiny_card(tmp_path, tiny):
    """cat([a (1, 64), b (1, 64)]) on one core of configs/tiny.toml (rules: docs/unit-program.md, DMA and DRAM;
    figures: tests/engine/test_dram.py).
    Buffers: a at 0 (channel 0, bank 0, row 0), b at 4096 (channel 0, channel-local row index 2: bank
    (2 ^ 1) % 2 = 1, row 1), y at 8192 (channel 0, row index 4: bank (4 ^ 2) % 2 = 0, row 2).
    Load a: request at mc0 at 4, ACT 4, column 14, data 19..23, back 27, done 28. Load b starts at 0
    (a has issued), its request queued behind a's and picked at a's column (14): ACT bank 1 at 14, column
    24, data 29..33, back 37, done 38. The store waits for the last load (38): its two sticks leave LX at
    38 and 39 and reach mc0 at 42 and 43; bank 0 holds row 0, so PRE at max(43, ACT 4 + tRAS 20) = 43,
    ACT 50, column 60, write data 60 + tWL 3 = 63..71: done 71."""
    path, _ = _program(tmp_path, [(1, 64), (1, 64)], 0)
    units = load(path, tiny).units
    assert [units.buffers[n].addr for n in ("x0", "x1", "y")] == [0, 4096, 8192]
    log = simulate(units, tiny)
    assert list(zip(log.start.tolist(), log.end.tolist(), strict=True)) == [(0, 28), (0, 38), (38, 71)]
    assert log.total_cycles == 71


def test_chunks_are_double_buffered(tmp_path, spyre):
    """Asked for four steps, each core loads its 8 output sticks 2 at a time into two alternating LX buffer sets."""
    path, xs = _program(tmp_path, [(16, 64), (16, 64)], 0, (4, 1))
    data = json.loads(path.read_text())
    data["kernels"][0]["steps"] = 4
    path.write_text(json.dumps(data))
    program = load(path, spyre)
    loads = [i for i in program.units.instructions() if i.core == 0 and i.op == "load"]
    assert [(i.args["lx"], i.args["bytes"]) for i in loads] == [(0, 2 * STICK), (2 * STICK, 2 * STICK)] * 2
    np.testing.assert_array_equal(run(program, spyre, functional=True).outputs["y"], np.concatenate(xs, 0))


def _random_case(rng):
    """Rank 2 or 3, two or three inputs, any dim (along the stick dim whole sticks but for the last input), on
    at most 4 cores."""
    rank, count = int(rng.integers(2, 4)), int(rng.integers(2, 4))
    dim = int(rng.integers(rank))
    base = [int(rng.integers(1, 5)) for _ in range(rank - 1)] + [int(rng.integers(1, 200))]
    sizes = [64 * int(rng.integers(1, 3)) if dim == rank - 1 and k < count - 1 else int(rng.integers(1, 5))
             for k in range(count)]
    shapes = [[n if d != dim else s for d, n in enumerate(base)] for s in sizes]
    out = [sum(sizes) if d == dim else n for d, n in enumerate(base)]
    slices = [int(rng.choice([k for k in (1, 2) if n % k == 0])) if d != rank - 1 else 1
              for d, n in enumerate(out)]
    return shapes, dim, slices


@pytest.mark.parametrize(("card", "seed"), [*(("tiny", s) for s in range(8)), *(("spyre", s) for s in range(8, 11))])
def test_engine_and_reference_agree(tmp_path, request, card, seed):
    machine = request.getfixturevalue(card)
    shapes, dim, slices = _random_case(np.random.default_rng(seed))
    path, xs = _program(tmp_path, shapes, dim, slices)
    program = load(path, machine)
    log, ref = simulate(program.units, machine), reference.simulate(program.units, machine)
    assert log.start.tolist() == list(ref.start)
    assert log.end.tolist() == list(ref.end)
    np.testing.assert_array_equal(run(program, machine, functional=True).outputs["y"], np.concatenate(xs, dim))


@pytest.mark.parametrize(("shapes", "dim", "dtypes", "out", "words"), [
    # y (4, 164): sticks are (column stick, row), stick 4 is row 0's lanes 64..127: x0's 64..99 and x1's 0..27
    ([(4, 100), (4, 64)], 1, None, None, r"kernels\[0\]\.inputs: output stick 4 is not one input stick lane for "
     r"lane: every input needs y's stick dim and, along it, every input but the last whole sticks \(sizes \[100\] "
     r"along dim 1, multiples of 64 expected there\)"),
    ([(3, 64), (3, 128)], 0, None, None, r"kernels\[0\]\.inputs: cat along dim 0 takes inputs of y's dtype and "
     r"rank, equal to y's shape outside dim 0"),
    ([(3, 64), (3, 64)], 0, ["fp16", "fp32"], None, r"kernels\[0\]\.inputs: cat along dim 0 .* \['fp16', 'fp32'\]"),
    ([(3, 64), (3, 64)], 0, None, [5, 64], r"kernels\[0\]\.inputs: cat along dim 0 .* y \[5, 64\]"),
    ([(3, 64), (3, 64)], 2, None, [3, 64], r"kernels\[0\]\.attrs\.dim: dim 2 is not a dim of the output's 2"),
    ([(3, 64)], 0, None, None, r"kernels\[0\]\.inputs: cat takes 2 or more inputs, got 1"),
])
def test_refusals_exit_2_naming_the_path(tmp_path, capsys, shapes, dim, dtypes, out, words):
    path, _ = _program(tmp_path, shapes, dim, dtypes=dtypes, out=out)
    assert main(["run", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"spyre-emu: error: {path}: ")
    assert re.search(words, err), err


def test_a_dim_that_is_not_an_integer_is_refused(tmp_path, spyre):
    path, _ = _program(tmp_path, [(3, 64), (3, 64)], 0)
    data = json.loads(path.read_text())
    data["kernels"][0]["attrs"]["dim"] = 0.5
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[0\]\.attrs\.dim: dim 0.5 is not a dim of the output's 2"):
        load(path, spyre)
