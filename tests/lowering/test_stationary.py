"""Which matmul operand stays in LX across a core's tiles: loads counted by hand, values exact."""

import json
from collections import Counter

import numpy as np
import pytest

from spyre_emu.config import load_machine
from spyre_emu.lowering.tiling import stationary
from spyre_emu.pipeline import load, run

LX = 12697  # the default card's chunk budget in sticks: (2 MB - 64 KB) x 0.8 / 128 B, rounded down


def _program(tmp_path, m, k, n, sk=1, sm=1, sn=1):
    """C (m x n) = A (m x k) @ B (k x n) divided (sm, sn, sk), random fp16 data: (path, numpy C)."""
    tensors = {"A": {"shape": [m, k], "dtype": "fp16", "role": "input", "data": "A.npy"},
               "B": {"shape": [k, n], "dtype": "fp16", "role": "input", "data": "B.npy"},
               "C": {"shape": [m, n], "dtype": "fp16", "role": "output"}}
    kernel = {"op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"], "dims": {"mb": m, "out": n, "in": k},
              "work_division": {"mb": sm, "out": sn, "in": sk}}
    path = tmp_path / "mm.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((m, k)).astype(np.float16), rng.standard_normal((k, n)).astype(np.float16)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    return path, a.astype(np.float32) @ b.astype(np.float32)


def _loaded(tmp_path, m, k, n, sk=1, sm=1, sn=1):
    """Bytes each operand's loads move, over every core, after checking the values against numpy."""
    machine = load_machine()
    path, want = _program(tmp_path, m, k, n, sk, sm, sn)
    program = load(path, machine)
    got = run(program, machine, functional=True).outputs["C"].astype(np.float32)
    np.testing.assert_allclose(got / np.sqrt(k), want / np.sqrt(k), rtol=1e-2, atol=1e-2)
    owner = {b.addr: name for name, b in program.units.buffers.items()}
    moved: Counter = Counter()
    for items in program.units.streams.values():
        for ins in items:
            if ins.op == "load":
                at = max(addr for addr in owner if addr <= int(ins.args["dram"]))
                moved[owner[at]] += int(ins.args["bytes"])
    return moved


def test_b_stays_across_row_blocks_when_it_fits(tmp_path):
    """256 rows are two row blocks of 128 (pt.max_tile_rows); B (128 x 64, 16 KB) fits LX whole, so it is
    loaded once instead of once per row block; A (64 KB) once."""
    assert _loaded(tmp_path, 256, 128, 64) == {"A": 256 * 128 * 2, "B": 128 * 64 * 2}


def test_b_is_streamed_again_per_row_block_when_k_is_split(tmp_path):
    """The same rows with K split over two cores: a core holding partial sums keeps nothing, so each streams
    its half of B (8 KB) once per row block, twice; A's halves once each."""
    assert _loaded(tmp_path, 256, 128, 64, sk=2) == {"A": 256 * 128 * 2, "B": 2 * 128 * 64 * 2}


def test_a_stays_across_column_blocks_when_it_fits(tmp_path):
    """16 rows by 60 column groups with K of 2 sticks: A and B's two chunk buffers (2 x (16 + 3,840) x 2 sticks)
    do not fit beside the C tile, so C goes in column blocks; A (16 x 128, 4 KB) stays in LX across them and
    is loaded once (streaming both loaded it once per block); B (480 KB) once."""
    assert _loaded(tmp_path, 16, 128, 3840) == {"A": 16 * 128 * 2, "B": 128 * 3840 * 2}


@pytest.mark.parametrize(("m", "n", "sm", "sn", "kept"), [(512, 64, 2, 1, "B"), (16, 7680, 1, 2, "A")])
def test_a_kept_operand_is_shared_by_its_cohort(tmp_path, m, n, sm, sn, kept):
    """Two cores share the kept operand: with 256 rows each they share B (16 KB) and keep it across their two
    row blocks; with 60 column groups each they share A (4 KB) and keep it across their column blocks. Its
    loaders multicast it once for both, and load it again for neither: A and B each cross DRAM once."""
    moved = _loaded(tmp_path, m, 128, n, 1, sm, sn)
    assert moved == {"A": m * 128 * 2, "B": 128 * n * 2}
    assert stationary(2, (m // sm, 128), n // 64 // sn, LX, 1)[0] == kept


@pytest.mark.parametrize(("k", "rows", "groups", "split", "want"), [
    # 512 rows (4 row blocks) x 2 groups x 64 K sticks: B is 8,192 sticks; with it kept, C's 256 and A's
    # buffers (2 x 128 x 8) fit: B loaded once instead of 4 times.
    (64, (512, 128), 2, 1, ("B", 2)),
    # The same under split K: nothing is kept, and both groups fit streamed (chunk (12,697 - 384) / 512 = 24).
    (64, (512, 128), 2, 2, ("", 2)),
    # 16 rows x 200 groups x 64 K sticks: streamed, 11 groups a block (12,697 - 16 g >= 8 x 2 (16 + 64 g));
    # A kept (1,024 sticks), also 11 (12,697 - 1,024 - 16 g >= 8 x 2 x 64 g): A once instead of 19 times.
    (64, (16, 16), 200, 1, ("A", 11)),
    # The same under split K over 2: A is not kept; the C tile and its receive area take 24 g sticks, so
    # 12,697 - 24 g >= 8 x 2 (16 + 64 g) gives 11 groups a block.
    (64, (16, 16), 200, 2, ("", 11)),
    # 128 rows x 8 groups x 64 K sticks: everything fits streamed; keeping saves nothing, so nothing is kept.
    (64, (128, 128), 8, 1, ("", 8)),
])
def test_the_choice_loads_the_fewest_sticks(k, rows, groups, split, want):
    assert stationary(k, rows, groups, LX, split) == want
