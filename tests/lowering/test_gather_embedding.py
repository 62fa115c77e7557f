"""embedding: rows of a table picked by int32 indices on the card, through indirect loads.

The indirect load is timed as the plain load of the address it was lowered with (lookup r reads row
r mod V); functional runs read the row the index names.
"""

import json

import numpy as np
import pytest

from spyre_emu import reference
from spyre_emu.engine import simulate
from spyre_emu.engine.functional import replay
from spyre_emu.errors import ProgramError, SimulationError
from spyre_emu.pipeline import load, run
from spyre_emu.unit_program import parse_unit_program
from tests.conftest import card_fp16, program

STICK = 128


def _program(tmp_path, rows, width, index, slices=1, dim_order=None):
    table = card_fp16(np.random.default_rng(3).standard_normal((rows, width))).astype(np.float16)
    np.save(tmp_path / "table.npy", table)
    np.save(tmp_path / "index.npy", np.asarray(index, np.int32))
    layout = {} if dim_order is None else {"layout": {"dim_order": dim_order}}
    n = len(index)
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"table": {"shape": [rows, width], "dtype": "fp16", "role": "input", "data": "table.npy",
                                  **layout},
                        "index": {"shape": [n], "dtype": "int32", "role": "input", "data": "index.npy"},
                        "y": {"shape": [n, width], "dtype": "fp16", "role": "output"}},
            "kernels": [{"op": "embedding", "inputs": ["table", "index"], "outputs": ["y"],
                         "dims": {"mb": n, "out": width}, "work_division": {"mb": slices}}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path, table


@pytest.mark.parametrize(("rows", "width", "index", "slices", "order"), [
    (100, 96, [5, 7, 99, 0, 5, 3, 42, 42], 4, None),       # repeats, the last row, two sticks a row
    (40, 64, list(range(39, -1, -1)) * 2, 8, None),         # every row, backwards, 80 lookups over 8 cores
    (50, 200, [1, 49, 2, 48, 0, 25], 3, None),              # four sticks a row, the last padded
])
def test_rows_match_numpy(tmp_path, spyre, rows, width, index, slices, order):
    path, table = _program(tmp_path, rows, width, index, slices, order)
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    np.testing.assert_array_equal(got, table[np.asarray(index)])


def test_timing_reads_row_r_mod_v(tmp_path, spyre):
    """Lookup r is lowered to the address of row r mod V: with 12 lookups into 5 rows, rows 0..4, 0..4, 0, 1;
    the table's default layout puts row v's first stick v sticks after row 0's."""
    path, _ = _program(tmp_path, 5, 64, [3] * 12)
    units = load(path, spyre).units
    base = units.buffers["table"].addr
    loads = [i.args for i in units.instructions() if "index_lx" in i.args]
    assert [a["index_row"] for a in loads] == [r % 5 for r in range(12)]
    assert [a["dram"] - base for a in loads] == [r % 5 * STICK for r in range(12)]
    assert {a["index_pitch"] for a in loads} == {STICK}


def test_timing_does_not_depend_on_the_indices(tmp_path, spyre):
    a, _ = _program(tmp_path, 30, 128, [0] * 16, 4)
    log_a = simulate(load(a, spyre).units, spyre)
    b, _ = _program(tmp_path, 30, 128, list(range(29, 13, -1)), 4)
    assert simulate(load(b, spyre).units, spyre).total_cycles == log_a.total_cycles


def test_engine_and_reference_agree(tmp_path, spyre):
    path, _ = _program(tmp_path, 100, 96, [5, 7, 99, 0, 5, 3, 42, 42], 4)
    units = load(path, spyre).units
    log, ref = simulate(units, spyre), reference.simulate(units, spyre)
    assert log.start.tolist() == list(ref.start)
    assert log.end.tolist() == list(ref.end)


def test_an_index_out_of_range_is_an_error(tmp_path, spyre):
    path, _ = _program(tmp_path, 10, 64, [1, 10])
    with pytest.raises(SimulationError, match="reads row 10 of a table of 10 rows"):
        run(load(path, spyre), spyre, functional=True)


def test_rows_must_be_whole_sticks(tmp_path, spyre):
    path, _ = _program(tmp_path, 50, 64, [1, 2], dim_order=[1, 0])
    with pytest.raises(ProgramError, match="stick dim must be their last"):
        load(path, spyre)


def test_the_table_must_be_2d_and_the_indices_int32(tmp_path, spyre):
    path, _ = _program(tmp_path, 10, 64, [1, 2])
    data = json.loads(path.read_text())
    data["tensors"]["index"]["dtype"] = "fp16"
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match=r"kernels\[0\].*int32 indices"):
        load(path, spyre)


def _indirect(tiny, value):
    """core 0: the index stick at 0 into LX 0, then one indirect load of the table row lowered as row 0
    (the table at 256, rows a stick apart) into LX 128, after the index load's end."""
    fetch = {"op": "load", "dram": 0, "lx": 0, "bytes": STICK, "signal": ["index"]}
    row = {"op": "load", "dram": 256, "lx": STICK, "bytes": STICK, "wait": ["index"], "index_lx": 8,
           "index_row": 0, "index_rows": 4, "index_pitch": STICK}
    buffers = {"index": {"bytes": STICK, "dtype": "int32", "addr": 0},
               "table": {"bytes": 4 * STICK, "dtype": "int8", "addr": 256}}
    index = np.zeros(32, np.int32)
    index[2] = value  # at LX byte 8
    data = {"index": index.view(np.uint8), "table": np.repeat(np.arange(4, dtype=np.uint8), STICK)}
    return parse_unit_program(program({0: {"load": [fetch, row]}}, buffers), tiny), data


def test_an_indirect_load_is_timed_by_its_lowered_address(tiny):
    """On configs/tiny.toml (tests/engine/test_strided.py): the index load ends at 28; the row load starts
    then, reaches channel 1 at 32 (closed bank): ACT 32, column 42, data 47..51, back at 55, done 56,
    whichever row the index names; the functional replay reads row 3 (bytes of 3)."""
    for value in (0, 3):
        units, data = _indirect(tiny, value)
        log = simulate(units, tiny)
        assert log.end.tolist() == [28, 56]
        card = replay(units, log, tiny, data)
        assert card.lx_of(0)[STICK:2 * STICK].tolist() == [value] * STICK


def test_an_indirect_load_out_of_range_is_an_error(tiny):
    units, data = _indirect(tiny, 4)
    with pytest.raises(SimulationError, match=r"load\[1\] reads row 4 of a table of 4 rows"):
        replay(units, simulate(units, tiny), tiny, data)


def test_an_indirect_load_names_every_field(tiny):
    row = {"op": "load", "dram": 256, "lx": 0, "bytes": STICK, "index_lx": 8}
    with pytest.raises(ProgramError, match="index_row missing"):
        parse_unit_program(program({0: {"load": [row]}}), tiny)
