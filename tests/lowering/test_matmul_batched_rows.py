"""A batched core keeps all its rows of C in LX (fewer batches per block); a 2-D core does row blocks of
``pt.max_tile_rows``. Counts derived by hand from the LX budget: (2 MB - 64 KB) x 0.8 = 12,697 sticks."""

import json

import numpy as np
import pytest

from spyre_emu.config import load_machine
from spyre_emu.lowering.operands import lines
from spyre_emu.pipeline import load, run
from tests.reference.test_differential import assert_agree


def _bmm(tmp_path, x, m, k, n, outer="", split_x=1):
    """A batched matmul on one core (``split_x`` cores along the batch); ``outer`` names the operands laid out
    batch-outer (dim_order [1, 0, 2])."""
    tensors = {"A": {"shape": [x, m, k], "dtype": "fp16", "role": "input", "data": "A.npy"},
               "B": {"shape": [x, k, n], "dtype": "fp16", "role": "input", "data": "B.npy"},
               "C": {"shape": [x, m, n], "dtype": "fp16", "role": "output"}}
    for name in outer:
        tensors[name]["layout"] = {"dim_order": [1, 0, 2]}
    kernel = {"op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"], "dims": {"x": x, "mb": m, "out": n, "in": k},
              "work_division": {"x": split_x, "mb": 1}}
    path = tmp_path / "bmm.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((x, m, k)).astype(np.float16), rng.standard_normal((x, k, n)).astype(np.float16)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    return path, a, b


def _load_pieces(units, op="load") -> list[int]:
    """Sticks per piece of every load (or store), in order (a strided one is bytes / piece pieces of piece bytes)."""
    return [i.args.get("piece", i.args["bytes"]) // 128 for i in units.instructions() if i.op == op
            for _ in range(i.args["bytes"] // i.args.get("piece", i.args["bytes"]))]


def test_batched_core_reads_b_once_for_256_rows(tmp_path):
    """2 batches of (256 x 128) @ (128 x 64) on one core, pt.max_tile_rows = 128: the core keeps its 256 rows
    (256 + 2 x (256 + 64) x 2 = 1,536 sticks a batch fit), so B (32 KB) is read once, not once per 128 rows."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 2, 256, 128, 64)
    result = run(load(path, machine), machine, functional=True)
    assert result.report.data["dram"]["read_bytes"] == a.nbytes + b.nbytes
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


def test_512_rows_leave_room_for_one_batch_per_block(tmp_path):
    """4 batches of (512 x 512) @ (512 x 64) on 2 cores, 2 batches each. All 512 rows: a batch needs C 512 + 2 x
    (512 + 64) x 8 = 9,728 sticks, two batches 20,480 > 12,697, so a block is one batch and every A and B piece is
    one stick: a core's A 2 x 512 rows x 8 K sticks = 8,192 pieces, B 2 x 512 K rows = 1,024. (Row blocks holding
    both batches would give 512 A pieces of 2 sticks per K stick and B pieces of 2: runs a core's 2 of 4 batches
    keep short either way.)"""
    machine = load_machine()
    path, _, _ = _bmm(tmp_path, 4, 512, 512, 64, split_x=2)
    assert _load_pieces(load(path, machine).units) == [1] * 2 * (8192 + 1024)


def test_a_core_with_every_batch_cuts_rows_not_batches(tmp_path):
    """2 batches of (512 x 512) @ (512 x 64) on one core, which holds both. A block of one batch at all 512 rows
    (above) would move 9,216 one-stick pieces; blocks of rows that hold both batches make each row's K chunk of
    both one run. The most rows that fit: 2r + 2 x (2r + 128) x 8 <= 12,697, r = 312 (blocks of 312 and 200). A
    row's 8 K sticks of both batches are 16 sticks and the next row follows, so each block of A is one run (4,992
    and 3,200 sticks); B's 512 K rows x 2 batches (1,024 sticks) stay in LX across the two blocks (624 + 1,024 +
    2 x 624 x 8 <= 12,697): 3 pieces, where one-batch blocks moved 9,216."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 2, 512, 512, 64)
    program = load(path, machine)
    assert sorted(_load_pieces(program.units)) == [1024, 3200, 4992]
    assert_agree(program.units, machine)  # the simpy reference times the row blocks as the engine does
    result = run(program, machine, functional=True)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=3e-1)


@pytest.mark.parametrize("rows", [256, 512])
def test_2d_core_keeps_row_blocks_and_b_across_them(tmp_path, rows):
    """The same rows in a 2-D matmul (one batch) are done in row blocks of 128, and B (16 KB) stays in LX across
    them (tiling.stationary): A and B each cross DRAM once. Under split K the blocks read B again
    (test_matmul.py)."""
    machine = load_machine()
    tensors = {"A": {"shape": [rows, 128], "dtype": "fp16", "role": "input"},
               "B": {"shape": [128, 64], "dtype": "fp16", "role": "input"},
               "C": {"shape": [rows, 64], "dtype": "fp16", "role": "output"}}
    kernel = {"op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"], "dims": {"mb": rows, "out": 64, "in": 128},
              "work_division": {"mb": 1}}
    path = tmp_path / "mm.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    report = run(load(path, machine), machine).report.data
    assert report["dram"]["read_bytes"] == rows * 128 * 2 + 128 * 64 * 2


def test_batched_rows_that_do_not_fit_fall_back_to_row_blocks(tmp_path):
    """8,192 rows of a batch leave no room beside C (8,192 + 2 x (8,192 + 64) > 12,697): row blocks of 128 (of
    both batches). B's output stick for the block (64 K rows x 2 batches = 128 sticks) stays in LX beside A's two
    chunk buffers (2 x 128 rows x 2 batches) and C (256): B (2 x 8 KB) is read once, not once per row block (64
    times), and A once."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 2, 8192, 64, 64)
    result = run(load(path, machine), machine, functional=True)
    assert result.report.data["dram"]["read_bytes"] == a.nbytes + b.nbytes
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


def test_row_blocks_hold_all_a_cores_batches(tmp_path):
    """4 batches of (1,024 x 2,048) @ (2,048 x 64) on one core. Its 1,024 rows are done in blocks; blocks of 128
    rows hold 3 of the 4 batches (C 512 + 2 x (512 + 256) x 8 = 12,800 > 12,697), and a block of some of the
    batches the default layout interleaves moves a piece per row and K stick of its batch count (A: 1,024 rows x
    32 K sticks x a piece of 3 and one of 1, 65,536 pieces). Blocks of 120 rows hold all 4 (480 + 2 x (480 + 256)
    x 8 = 12,256): A is 1,024 rows x 4 chunks of 8 K sticks, each row's chunk of every batch one piece of 32 sticks,
    and B a run of 512 K rows x 4 batches a chunk, read per row block: 9 x 4 pieces of 2,048 sticks."""
    machine = load_machine()
    path, _, _ = _bmm(tmp_path, 4, 1024, 2048, 64)
    assert sorted(_load_pieces(load(path, machine).units)) == [32] * 4096 + [2048] * 36


@pytest.mark.parametrize(("m", "k", "n", "a_reads", "b_reads"), [(8192, 64, 64, 1, 1), (512, 128, 4096, 2, 1)])
def test_one_batch_is_tiled_as_a_2d_matmul(tmp_path, m, k, n, a_reads, b_reads):
    """A batch of one has no blocks of batches to size, so it is tiled as a 2-D matmul (tiling.stationary):
    8,192 rows keep B (8 KB) in LX across their 64 row blocks, read once (the batched order read it 64 times);
    a Q·Kᵀ of one head (512 × 128 @ 128 × 4,096 on one core) does C in two column blocks (47 and 17 of its 64
    output sticks, as many as LX holds beside B's), reading A once per block (the batched order: once per output
    stick, 64 times)."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 1, m, k, n)
    result = run(load(path, machine), machine, functional=True)
    assert result.report.data["dram"]["read_bytes"] == a_reads * a.nbytes + b_reads * b.nbytes
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


def test_a_block_of_every_batch_loads_its_rows_as_one_piece(tmp_path):
    """2 batches of (16 x 128) @ (128 x 64) on one core. The default 3-D layout holds A as [row][K stick][batch]
    and B as [K row][column stick][batch]; a block of both batches keeps that order in LX, so A's 16 rows x 2 K
    sticks x 2 batches are one DRAM run of 64 sticks and B's 128 K rows x 2 batches one of 256: one piece each
    (K sticks outermost in LX, A was 32 pieces of 2 sticks)."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 2, 16, 128, 64)
    program = load(path, machine)
    assert _load_pieces(program.units) == [64, 256]
    result = run(program, machine, functional=True)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize(("x", "m", "k", "n"), [(3, 200, 1024, 128), (4, 700, 1500, 130), (11, 700, 1500, 65),
                                                (1, 300, 640, 1000), (1, 40, 3000, 2048)])
def test_rows_outer_tiles_of_several_chunks_give_numpys_values(tmp_path, x, m, k, n):
    """A and B sit in LX rows outermost, a PT pass reading them at those strides: blocks of 2 and 1 of 3 batches,
    16 K sticks in chunks of 11 and 5; all 4 batches in row blocks of 120 (the last 100), 24 K sticks (the last
    padded) in chunks of 8, the last output stick 2 columns wide; 11 batches, which not even 8 rows hold at once,
    in blocks of 3, 3, 3 and 2 in row blocks of 128 (the last 60), each output stick's B kept across them while A
    streams in chunks of 9, 9 and 6 beside two C buffers, the last output stick 1 column wide; one batch (tiled as
    2-D) in column blocks of 13 output sticks with B kept across row blocks of 128, 128 and 44; and with A kept
    across column blocks of 10, its 47 K sticks (the last padded) in chunks of 8 at their offsets in its row."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, x, m, k, n)
    result = run(load(path, machine), machine, functional=True)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=3e-1)


@pytest.mark.parametrize(("outer", "stores"), [("", [1] * 32), ("ABC", [32])])
def test_batch_outer_operands_move_as_their_layout_holds_them(tmp_path, outer, stores):
    """The same 2 batches of (16 x 128) @ (128 x 64) on one core with every operand batch-outer (dim_order
    [1, 0, 2]: a batch's 2-D layout after another's). A's 2 batches x 2 K sticks x 16 rows and B's 2 batches x 128
    K rows are again one DRAM run each, now in LX batch by batch, and C (2 batches x 16 rows) is one run where the
    default layout (rows outermost, the batch inside) scatters it into 32 one-stick pieces."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 2, 16, 128, 64, outer)
    program = load(path, machine)
    assert _load_pieces(program.units) == [64, 256]
    assert _load_pieces(program.units, "store") == stores
    result = run(program, machine, functional=True)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize("outer", ["A", "B", "C", "AB", "ABC"])
@pytest.mark.parametrize(("x", "m", "k", "n"), [(3, 200, 1024, 130), (4, 700, 1500, 130)])
def test_batch_outer_layouts_give_numpys_values(tmp_path, outer, x, m, k, n):
    """Any operands batch-outer, the others in the default layout: with A and B both batch-outer the batches are
    tiled as 2-D matmuls (column blocks, no batch blocks of one output stick), else in batch blocks; chunks of K,
    row blocks and a kept B as in the rows-outer cases above."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, x, m, k, n, outer)
    result = run(load(path, machine), machine, functional=True)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=3e-1)


def test_a_scattered_c_is_double_buffered(tmp_path):
    """2 batches of (16 x 128) @ (128 x 192) on one core: three tiles, an output stick each, of 16 rows x 2 batches
    (32 sticks). C's default layout holds a PT pass's rows apart (rows outermost), so each store is 32 one-stick
    pieces; C alternates between two LX buffers 4,096 B apart, and a tile's first passes wait for the stores of the
    tile two before (none for the second tile), not of the one before."""
    machine = load_machine()
    path, a, b = _bmm(tmp_path, 2, 16, 128, 192)
    program = load(path, machine)
    assert _load_pieces(program.units, "store") == [1] * 96
    stores = [i for i in program.units.instructions() if i.op == "store"]
    tiles = [stores[0:2], stores[2:4], stores[4:6]]  # each tile's 32 pieces: two strided descriptors
    assert [t[0].args["lx"] - tiles[0][0].args["lx"] for t in tiles] == [0, 4096, 0]
    first = {u: [i for i in program.units.instructions() if i.op == "matmul" and i.unit == u] for u in ("pt0", "pt1")}
    for u, passes in first.items():
        waits = [set(p.wait) for p in passes]
        assert not any(s in w for s in tiles[0][-1].signal for w in waits[:2])
        assert any(s in waits[2] for s in tiles[0][-1].signal), u
        assert not any(s in waits[2] for s in tiles[1][-1].signal), u
    result = run(program, machine, functional=True)
    want = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


def test_lines_join_what_lx_holds_without_a_gap():
    """operands.lines: ids [2 batches][3 K sticks][2 rows] at LX strides (6, 2, 1) fill LX without a gap: one list
    at offset 0, its runs broken at every row pair (ids 0-1 and 2-3 touch but are two lines); with a batch stride
    of 8 (a gap) one list per batch, at 0 and 8; with a K stride of 3 one list per line."""
    ids = np.arange(12).reshape(2, 3, 2)
    pairs = [[(i, 2)] for i in range(0, 12, 2)]
    assert lines(ids, (6, 2, 1)) == [(sum(pairs, []), 0)]
    assert lines(ids, (8, 2, 1)) == [(sum(pairs[:3], []), 0), (sum(pairs[3:], []), 8)]
    assert lines(ids, (9, 3, 1)) == [(p, o) for p, o in zip(pairs, [0, 3, 6, 9, 12, 15], strict=True)]


@pytest.mark.parametrize("outer", ["", "AB", "ABC"])
def test_the_reference_times_the_new_orders_as_the_engine_does(tmp_path, outer):
    """The simpy reference and the engine agree cycle for cycle on the orders above: rows outermost with a second C
    buffer (default layouts: 3 tiles of one output stick), and batch-outer operands tiled as 2-D."""
    machine = load_machine()
    path, _, _ = _bmm(tmp_path, 2, 16, 128, 192, outer)
    assert_agree(load(path, machine).units, machine)
