"""engine.pack builds its instruction table from the program's columns with numpy; here the same
table is built one instruction at a time, straight from each instruction's arguments, and the two
must be equal, array for array (instruction table, token lists, each unit's range, token names)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from spyre_emu.config import STICK_BYTES, Machine
from spyre_emu.engine import layout as L
from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load_program, parse
from spyre_emu.unit_program import UnitProgram, parse_unit_program
from spyre_emu.unit_program.model import matmul_repeat
from spyre_emu.unit_program.opcodes import SFU_OPS, Op
from spyre_emu.validation.workloads import matmul_program
from tests.conftest import ROOT, program
from tests.reference.programs import unit_programs

pack_module = importlib.import_module("spyre_emu.engine.pack")  # engine.pack is also the function's name
DMA = ("load", "store", "h2d", "d2h")


def _row(ins, machine: Machine) -> list[int]:
    """One instruction's row, as the engine reads it (layout.py), its unit and tokens left out."""
    row, a = [0] * L.I_COLS, ins.args
    if ins.op in SFU_OPS:
        per_stick = pack_module.sfu_stick_cycles(machine, ins.op)
        row[L.I_OP], row[L.I_A0] = Op.SFU, SFU_OPS[ins.op].code
        row[L.I_A1], row[L.I_A3], row[L.I_A4] = a["a"] == "fifo", a["out"] == "fifo", a["sticks"]
        row[L.I_A5], row[L.I_A6] = per_stick, machine.sfu.latency_cycles
        row[L.I_DUR] = machine.sfu.latency_cycles + a["sticks"] * per_stick
        return row
    row[L.I_OP] = Op[ins.op.upper()]
    if ins.op in DMA:
        piece = a.get("piece", a["bytes"])
        row[L.I_A0], row[L.I_A1], row[L.I_A2] = a["dram"], a.get("lx", 0), a["bytes"]
        row[L.I_A5], row[L.I_A6] = piece, a.get("stride", piece)
        row[L.I_DUR] = machine.pcie.latency_cycles if ins.op in ("h2d", "d2h") else 0
        if "to" in a:
            row[L.I_A3] = sum(1 << machine.stop_of(f"core{c}") for c in a["to"])
            row[L.I_A4] = len(a["to"])
    elif ins.op == "send":
        row[L.I_A0], row[L.I_A1], row[L.I_A2] = a["lx"], a["to_core"], a["bytes"]
        row[L.I_A3] = machine.stop_of(f"core{a['to_core']}")
        row[L.I_A5] = row[L.I_A6] = a["bytes"]
    elif ins.op in ("lx2fifo", "fifo2lx"):
        row[L.I_A4] = a["bytes"] // STICK_BYTES
    else:
        row[L.I_DUR] = matmul_repeat(a) * pack_module.pt_pass_cycles(machine, a["rows"], a["k"],
                                                                     a.get("dtype", "fp16"), a.get("cols"))
    return row


def _expected(units: UnitProgram, machine: Machine):
    """(table, token lists, {unit: (first, end)}, token names), one instruction at a time."""
    rows, toks, token_id, ranges = [], [], {}, {}
    for (core, unit), stream in units.streams.items():
        u = pack_module.unit_index(machine, core, unit)
        ranges[u] = (len(rows), len(rows) + len(stream))
        for ins in stream:
            row = _row(ins, machine)
            row[L.I_UNIT], row[L.I_W0] = u, len(toks)
            toks += [token_id.setdefault(t, len(token_id)) for t in ins.wait]
            row[L.I_W1] = row[L.I_S0] = len(toks)
            toks += [token_id.setdefault(t, len(token_id)) for t in ins.signal]
            row[L.I_S1] = len(toks)
            rows.append(row)
    return np.array(rows, np.int64).reshape(-1, L.I_COLS), np.array(toks or [0], np.int64), ranges, list(token_id)


def assert_packed_as_expected(units: UnitProgram, machine: Machine) -> None:
    packed = pack_module.pack(units, machine, 1 << 62)
    ins, toks, us = packed.state[L.ST_INS], packed.state[L.ST_TOKS], packed.state[L.ST_US]
    table, want_toks, ranges, tokens = _expected(units, machine)
    if len(table):
        np.testing.assert_array_equal(ins, table)
    np.testing.assert_array_equal(toks, want_toks)
    assert packed.tokens == tokens
    assert list(packed.instructions) == units.instructions()
    for u in range(us.shape[0]):
        first, end = ranges.get(u, (0, 0))
        assert (us[u, L.U_PC], us[u, L.U_OLDEST], us[u, L.U_END]) == (first, first, end), packed.unit_names[u]


@pytest.mark.parametrize("machine_name", ["tiny", "spyre"])
def test_random_programs(machine_name, request):
    """Every op, multicast and strided DMA, sends, repeats, FIFOs, host copies and tokens."""
    machine = request.getfixturevalue(machine_name)

    @settings(max_examples=20, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(unit_programs(machine))
    def check(data):
        assert_packed_as_expected(parse_unit_program(data, machine, "random"), machine)
    check()


@pytest.mark.parametrize(("shape", "split"), [((1, 128, 512, 1024), (1, 4, 2, 4)), ((1, 64, 1024, 512), (1, 32, 1, 1))])
def test_lowered_matmuls(spyre, shape, split):
    """The lowering's own output: split K's reduction, multicast cohorts, repeat passes."""
    assert_packed_as_expected(parse(matmul_program(*shape, split), spyre, "calibration").units, spyre)


@pytest.mark.parametrize("name", ["softmax_1core", "layernorm_residual_kernels", "gemm_1024_32core"])
def test_examples(spyre, name):
    assert_packed_as_expected(load_program(ROOT / "examples" / "programs" / f"{name}.json", spyre), spyre)


def test_empty_units_and_shared_tokens(spyre):
    """Units without instructions keep an empty range; a token waited on before it is signalled is
    numbered where it is first named."""
    data = program({0: {"pt1": [{"op": "matmul", "a": 0, "b": 4096, "c": 8192, "rows": 8, "k": 64,
                                 "wait": ["t"], "signal": ["u"]}],
                        "sfu0": [{"op": "relu", "a": 0, "out": 128, "sticks": 2, "signal": ["t"]}]},
                    3: {"load": [{"op": "load", "dram": 0, "lx": 0, "bytes": 256, "wait": ["u"]}]}})
    assert_packed_as_expected(parse_unit_program(data, spyre, "tokens"), spyre)


@pytest.mark.parametrize("machine_name", ["tiny", "spyre"])
def test_unsignalled_waits_found_on_the_columns(machine_name, request):
    """``Columns.all_waits_signalled`` (numpy over token numbers) answers as a set of every signalled name
    does, on random programs as drawn and with one wait renamed to a token nobody signals."""
    machine = request.getfixturevalue(machine_name)

    @settings(max_examples=20, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(unit_programs(machine))
    def check(data):
        units = parse_unit_program(data, machine, "random")
        signalled = {t for ins in units.columns.instructions for t in ins.signal}
        assert units.columns.all_waits_signalled()
        waiting = [item for core in data["cores"] for items in core["units"].values() for item in items
                   if item.get("wait")]
        if waiting:
            waiting[-1]["wait"] = [*waiting[-1]["wait"], "nobody"]
            assert "nobody" not in signalled
            with pytest.raises(ProgramError, match="waits on token 'nobody' that no instruction signals"):
                parse_unit_program(data, machine, "random")
    check()
