"""Matmul kernels lowered to PT passes: values against numpy, work divisions, the PT peak."""

import json

import numpy as np
import pytest

from spyre_emu.config import STICK_BYTES, load_machine
from spyre_emu.errors import ConfigError, ProgramError
from spyre_emu.lowering import matmul, split_k
from spyre_emu.lowering.placement import as_runs, cut_runs, rows_as_runs
from spyre_emu.lowering.streams import halves
from spyre_emu.pipeline import load, parse, run
from spyre_emu.validation.workloads import matmul_program
from tests.reference.test_differential import assert_agree


def _program(tmp_path, m, k, n, sm, sn, dims_order=("mb", "in", "out"), sk=1):
    sizes = {"mb": m, "in": k, "out": n}
    slices = {"mb": sm, "in": sk, "out": sn}
    tensors = {"A": {"shape": [m, k], "dtype": "fp16", "role": "input", "data": "A.npy"},
               "B": {"shape": [k, n], "dtype": "fp16", "role": "input", "data": "B.npy"},
               "C": {"shape": [m, n], "dtype": "fp16", "role": "output"}}
    kernel = {"op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"],
              "dims": {d: sizes[d] for d in dims_order}, "work_division": {d: slices[d] for d in dims_order}}
    path = tmp_path / "mm.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    rng = np.random.default_rng(7)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    return path, a.astype(np.float32) @ b.astype(np.float32)


@pytest.mark.parametrize(("m", "k", "n", "sm", "sn"), [
    (64, 128, 128, 1, 1),      # one core, both PT arrays
    (100, 200, 130, 4, 3),     # padding in K and N, 25 rows per core (a short last pass)
    (256, 4096, 128, 1, 2),    # K in several double-buffered chunks
    (512, 256, 512, 8, 4),     # 32 cores
    (16, 128, 3840, 1, 1),     # 60 column groups do not fit LX at once: two column blocks
    (512, 4096, 1600, 1, 5),   # A shared by 5 cores, in K chunks whose last is shorter: the same loaders in every chunk
])
def test_values_match_numpy(tmp_path, spyre, m, k, n, sm, sn):
    path, want = _program(tmp_path, m, k, n, sm, sn)
    got = run(load(path, spyre), spyre, functional=True).outputs["C"]
    scale = np.sqrt(k)
    np.testing.assert_allclose(got.astype(np.float32) / scale, want / scale, rtol=1e-2, atol=1e-2)


def test_dims_in_any_order_divide_the_same_way(tmp_path, spyre):
    path, want = _program(tmp_path, 64, 64, 256, 2, 4, dims_order=("out", "mb", "in"))
    got = run(load(path, spyre), spyre, functional=True).outputs["C"]
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=5e-2)


def test_never_beats_the_pt_peak(tmp_path, spyre):
    m, k, n, sm, sn = 512, 1024, 512, 8, 4
    path, _ = _program(tmp_path, m, k, n, sm, sn)
    cycles = run(load(path, spyre), spyre).report.total_cycles
    assert m * k * n / (cycles * sm * sn) <= 2 * spyre.pt.macs_per_cycle("fp16")


@pytest.mark.parametrize(("m", "k", "n", "sm", "sn", "sk"), [
    (64, 256, 128, 1, 1, 2),     # two halves of K reduced over the ring
    (64, 512, 256, 2, 2, 8),     # 32 cores, K groups of 8 with A and B shared
    (16, 1024, 3840, 1, 1, 4),   # several column tiles, each reduced in turn
    (24, 320, 64, 1, 1, 4),      # 3 passes of rows, 5 K sticks: uneven pieces of an uneven K
])
def test_split_k_values_match_numpy(tmp_path, spyre, m, k, n, sm, sn, sk):
    path, want = _program(tmp_path, m, k, n, sm, sn, sk=sk)
    if k // 64 % sk:
        data = json.loads(path.read_text())
        data["kernels"][0]["uneven"] = True
        path.write_text(json.dumps(data))
    got = run(load(path, spyre), spyre, functional=True).outputs["C"]
    scale = np.sqrt(k)
    np.testing.assert_allclose(got.astype(np.float32) / scale, want / scale, rtol=1e-2, atol=1e-2)


def test_split_k_needs_whole_sticks(tmp_path, spyre):
    path, _ = _program(tmp_path, 64, 192, 64, 1, 1, sk=2)
    with pytest.raises(ProgramError, match=r"K \(3 sticks\) does not split into 2"):
        load(path, spyre)


def test_shared_operands_cross_dram_once(tmp_path, spyre):
    """A (8, 4) division reads A and B once each: B's column blocks go to 8 cores, A's rows to 4."""
    m, k, n = 512, 256, 512
    path, _ = _program(tmp_path, m, k, n, 8, 4)
    report = run(load(path, spyre), spyre).report.data
    assert report["dram"]["read_bytes"] == 2 * (m * k + k * n)


def _batched(tmp_path, machine, shape: tuple[int, int, int, int], division: dict[str, int], seed: int):
    """Run C = A @ B for ``shape`` = (x, m, k, n), random fp16 data, with ``division``: (result, a, b)."""
    x, m, k, n = shape
    tensors = {"A": {"shape": [x, m, k], "dtype": "fp16", "role": "input", "data": "A.npy"},
               "B": {"shape": [x, k, n], "dtype": "fp16", "role": "input", "data": "B.npy"},
               "C": {"shape": [x, m, n], "dtype": "fp16", "role": "output"}}
    kernel = {"op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"],
              "dims": {"x": x, "mb": m, "out": n, "in": k}, "work_division": division}
    path = tmp_path / "bmm.json"
    path.write_text(json.dumps({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                "kernels": [kernel]}))
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((x, m, k)).astype(np.float16), rng.standard_normal((x, k, n)).astype(np.float16)
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    result = run(load(path, machine), machine, functional=True)
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), a.astype(np.float32) @ b.astype(np.float32),
                               rtol=1e-2, atol=5e-2)
    return result, a, b


@pytest.mark.parametrize(("x", "sx", "sm"), [(8, 8, 1), (4, 2, 2), (3, 1, 1)])
def test_batched_values_match_numpy(tmp_path, spyre, x, sx, sm):
    _batched(tmp_path, spyre, (x, 32, 96, 128), {"x": sx, "mb": sm}, 11)


def _without_counts(report):
    """A report's figures but its instruction counts (all that merging passes may change)."""
    if isinstance(report, dict):
        return {k: _without_counts(v) for k, v in report.items() if k != "instructions"}
    return [_without_counts(v) for v in report] if isinstance(report, list) else report


@pytest.mark.parametrize(("shape", "split"), [((1, 100, 200, 256), (1, 2, 2, 2)), ((2, 100, 200, 256), (2, 2, 2, 2)),
                                              ((1, 1, 4096, 512), (1, 1, 8, 1)), ((1, 512, 1024, 512), (1, 4, 2, 2))])
def test_merged_passes_time_exactly_as_one_pass_each(spyre, monkeypatch, shape, split):
    """The proof of the repeat merge: the same kernel lowered with one instruction per pass gives the
    same report, cycle for cycle, with more instructions."""
    def simulate():
        program = parse(matmul_program(*shape, split), spyre, "mm")
        return run(program, spyre, cache=False).report.data

    merged = simulate()
    monkeypatch.setattr(matmul, "repeats", lambda fixed, passes: [
        {**fixed, "a": a, "b": b, "c": c, "rows": rows} for a, b, c, rows in passes])
    single = simulate()
    assert merged["instructions"] < single["instructions"]
    assert _without_counts(merged) == _without_counts(single)


def test_rows_as_runs_is_as_runs_row_by_row():
    rng = np.random.default_rng(3)
    for width in (0, 1, 2, 7):
        ids = np.cumsum(rng.integers(1, 3, (5, width)), axis=1) + rng.integers(0, 100, (5, 1))
        assert rows_as_runs(ids) == [as_runs(row) for row in ids]


def test_cut_runs_is_as_runs_of_the_cut_ids():
    """Random runs, some touching (as_runs merges those) and some going backwards, cut at every (lo, hi)."""
    rng = np.random.default_rng(5)
    for _ in range(200):
        starts = np.cumsum(rng.integers(-3, 4, 6)) + 50
        runs = [(int(s), int(n)) for s, n in zip(starts, rng.integers(1, 4, 6), strict=True)]
        ids = np.concatenate([np.arange(s, s + n) for s, n in runs])
        for lo in range(ids.size):
            for hi in range(lo + 1, ids.size + 1):
                assert cut_runs(runs, lo, hi) == as_runs(ids[lo:hi])


@pytest.mark.parametrize(("tile_rows", "b_reads"), [(128, 2), (256, 1)])
def test_rows_beyond_max_tile_rows_stream_b_again(tmp_path, tile_rows, b_reads):
    """256 rows of C, K split over two cores: with pt.max_tile_rows = 128 each core computes two row blocks,
    each reading its half of B (8 KB) again (under split K, B does not stay in LX: tests/lowering/
    test_stationary.py); A (64 KB) is read once either way. The values are exact both ways."""
    machine = load_machine(overrides=[f"pt.max_tile_rows={tile_rows}"])
    path, want = _program(tmp_path, 256, 128, 64, 1, 1, sk=2)
    result = run(load(path, machine), machine, functional=True)
    a_bytes, b_bytes = 256 * 128 * 2, 128 * 64 * 2
    assert result.report.data["dram"]["read_bytes"] == a_bytes + b_reads * b_bytes
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize(("n", "a_reads"), [(64, 1), (128, 2)])
def test_batched_cores_read_a_once_per_output_stick(tmp_path, n, a_reads):
    """One core, 4 batches of (32 x 128) @ (128 x n): a batch block is sized for one output stick, so with
    two sticks (n = 128) the core reads the block's A (32 KB) again for the second; B and C once."""
    result, a, b = _batched(tmp_path, load_machine(), (4, 32, 128, n), {"x": 1, "mb": 1}, 5)
    assert result.report.data["dram"]["read_bytes"] == a_reads * a.nbytes + b.nbytes


def test_batched_core_stores_c_one_stick_a_piece_and_reads_a_per_output_stick(tmp_path):
    """One core, 4 batches of (16 x 128) @ (128 x 256), a Q·Kᵀ-like tile with 4 output sticks (session 40's
    account of where wide-N time goes, docs/decisions/fidelity.md). By hand: C's layout is [row][N stick][batch]
    [64], and the core's LX holds C batch by batch, rows innermost, so consecutive LX sticks are 4 x 4 = 16 DRAM
    sticks apart and every one of C's 4 x 16 x 4 = 256 sticks is a piece of its own; a tile is one output
    stick, so A (16 KB) is read 4 times and B (64 KB) once."""
    result, a, b = _batched(tmp_path, load_machine(), (4, 16, 128, 256), {"x": 1, "mb": 1}, 7)
    assert result.report.data["dram"]["read_bytes"] == 4 * a.nbytes + b.nbytes
    program = load(tmp_path / "bmm.json", load_machine()).units
    stores = [ins.args for (_, unit), stream in program.streams.items() if unit == "store" for ins in stream]
    assert sum(s["bytes"] // s.get("piece", s["bytes"]) for s in stores) == 256
    assert {s.get("piece", s["bytes"]) for s in stores} == {STICK_BYTES}


def test_split_k_adds_run_on_one_sfu(tmp_path, monkeypatch):
    """64 x 128 @ 128 x 64 with K split over two cores: each core's C tile is 64 sticks, cut into two chunks of
    32; in the one reduction step each core adds the 32 sticks it receives into its own. Under the unichain
    PSUM path one corelet does that (docs/decisions/fidelity.md), so by hand the add is one instruction on
    sfu0 of 4 + 32 x 16 = 516 cycles (configs/spyre.toml: latency 4, 16 cycles a stick on one SFU), where
    the two halves on both SFUs took 4 + 16 x 16 = 260 each, side by side; nothing else moves, so the run is
    516 - 260 = 256 cycles longer (the passes on both PT arrays, as before ``pt.split_k_corelets``). The
    values are exact."""
    spyre = load_machine(overrides=["pt.split_k_corelets=2"])
    path, want = _program(tmp_path, 64, 128, 64, 1, 1, sk=2)
    result = run(load(path, spyre), spyre, functional=True, cache=False)
    log = result.log
    adds = [i for i, ins in enumerate(log.instructions) if ins.op == "add"]
    assert len(adds) == 2
    for i in adds:
        ins = log.instructions[i]
        assert ins.unit == "sfu0"
        assert ins.args["sticks"] == 32
        assert log.end[i] - log.start[i] == 4 + 32 * 16
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)
    monkeypatch.setattr(split_k, "_adder", halves)
    both = run(load(path, spyre), spyre, cache=False).log
    assert log.total_cycles - both.total_cycles == (4 + 32 * 16) - (4 + 16 * 16)


def test_split_k_passes_run_on_one_corelet(tmp_path, spyre):
    """The same K split: each core's 64 rows are 8 passes of 8 rows x one 64-column group x K = 64, each
    8 (fill) + max(8 x 64 x 64 / 512 MACs, 64 x 64 x 2 / 128 B sticks) + 8 (drain) = 80 cycles
    (engine/pack.py). With ``pt.split_k_corelets`` = 1 (configs/spyre.toml) all 8 run on pt0, back to back
    (640 cycles), where two corelets ran 4 each side by side (320): each core's reduction send starts 320
    cycles later. (The run's end also moves with where its stores meet DRAM refresh, so it is bounded, not
    pinned.) The values are the same."""
    path, want = _program(tmp_path, 64, 128, 64, 1, 1, sk=2)
    one = run(load(path, spyre), spyre, functional=True, cache=False)
    both_machine = load_machine(overrides=["pt.split_k_corelets=2"])
    both = run(load(path, both_machine), both_machine, cache=False).log

    def spans(log, op):
        return {(ins.core, ins.unit): (log.start[i], log.end[i]) for i, ins in enumerate(log.instructions)
                if ins.op == op}

    passes, two = spans(one.log, "matmul"), spans(both, "matmul")
    assert sorted(passes) == [(0, "pt0"), (1, "pt0")]
    assert sorted(two) == [(c, u) for c in (0, 1) for u in ("pt0", "pt1")]
    for core in (0, 1):
        assert passes[core, "pt0"][1] - passes[core, "pt0"][0] == 8 * 80
        assert two[core, "pt0"][1] - two[core, "pt0"][0] == two[core, "pt1"][1] - two[core, "pt1"][0] == 4 * 80
        assert spans(one.log, "send")[core, "send"][0] - spans(both, "send")[core, "send"][0] == 4 * 80
    assert one.log.total_cycles >= both.total_cycles + 4 * 80
    np.testing.assert_allclose(one.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)
    assert_agree(load(path, spyre).units, spyre)  # the simpy reference times the one-array passes alike


def test_split_k_reduces_a_tile_while_the_next_one_computes(tmp_path, spyre):
    """256 x 128 @ 128 x 64, K split over two cores: each core's 256 rows are two tiles of 128 (pt.max_tile_rows),
    each 16 passes of 80 cycles on pt0 (1,280). The second tile computes into a second C buffer, 128 sticks on,
    so its passes follow the first tile's back to back while the first tile's reduction send (64 sticks) runs
    beside them; its add is 4 + 64 x 16 = 1,028 cycles on sfu0. Values exact; the simpy reference agrees."""
    path, want = _program(tmp_path, 256, 128, 64, 1, 1, sk=2)
    result = run(load(path, spyre), spyre, functional=True, cache=False)
    log = result.log
    mine = [(ins, log.start[i], log.end[i]) for i, ins in enumerate(log.instructions) if ins.core == 0]
    passes = [(ins.args["c"], start, end) for ins, start, end in mine if ins.op == "matmul"]
    sends = [(start, end) for ins, start, end in mine if ins.op == "send"]
    assert len(passes) == len(sends) == 2
    (c0, s0, e0), (c1, s1, e1) = passes
    assert (e0 - s0, s1, e1 - s1, c1 - c0) == (16 * 80, e0, 16 * 80, 128 * STICK_BYTES)
    assert sends[0][0] == e0 < sends[0][1] < e1  # the first tile's reduction runs beside the second tile's passes
    assert [end - start for ins, start, end in mine if ins.op == "add"] == [4 + 64 * 16] * 2
    np.testing.assert_allclose(result.outputs["C"].astype(np.float32), want, rtol=2e-2, atol=2e-1)
    assert_agree(load(path, spyre).units, spyre)


def test_split_k_corelets_is_checked():
    with pytest.raises(ConfigError, match="split_k_corelets.*must be 1 or 2"):
        load_machine(overrides=["pt.split_k_corelets=3"])


@pytest.mark.parametrize("split", [(1, 4, 8, 1), (1, 1, 2, 16), (4, 4, 2, 1)])
def test_passes_signal_done_only_to_an_operands_loads(spyre, split):
    """A chunk's passes tell the loads of A or B (the token names the operand and its loading core) that the
    chunk is read; with nothing kept in LX there is no kept operand to tell (a token of no operand was signalled
    and awaited by nothing)."""
    b = 32 if split[0] > 1 else 1
    units = parse(matmul_program(b, 512, 128 if b > 1 else 4096, 512 if b > 1 else 4096, split), spyre, "t").units
    done = {t.split(".")[2] for items in units.streams.values() for ins in items if ins.unit.startswith("pt")
            for t in ins.signal if ".q" in t and "<c" in t}
    assert done
    assert {src[0] for src in done} <= {"A", "B"}, sorted(done)[:4]
