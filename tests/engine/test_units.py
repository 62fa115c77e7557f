"""PT, SFU, FIFO, token and PCIe timing, derived by hand on configs/tiny.toml."""

import pytest

from spyre_emu.engine import layout
from spyre_emu.unit_program.opcodes import Op


def _matmul(k, dtype="fp16"):
    return {"op": "matmul", "a": 0, "b": 65536, "c": 32768, "rows": 8, "k": k, "dtype": dtype}


@pytest.mark.parametrize(("k", "dtype", "cycles"), [
    (64, "fp16", 8 + 64 + 8),    # 8*64*64 MACs / 512 per cycle = 64; B: 64 sticks
    (100, "fp16", 8 + 100 + 8),
    (64, "fp8", 8 + 32 + 8),     # 1024 MAC/cycle: 32; B: 64*64 B = 32 sticks
    (64, "fp32", 8 + 128 + 8),   # 256 MAC/cycle: 128; B: 64*256 B = 128 sticks
])
def test_pt_pass(tiny, run_units, k, dtype, cycles):
    log = run_units(tiny, {0: {"pt0": [_matmul(k, dtype)]}})
    assert log.total_cycles == cycles


def test_both_corelets_run_in_parallel(tiny, run_units):
    log = run_units(tiny, {0: {"pt0": [_matmul(64)] * 3, "pt1": [_matmul(64)] * 3}})
    assert log.total_cycles == 3 * 80


def test_repeat_takes_its_passes_back_to_back(tiny, run_units):
    """repeat = 3 is three 80-cycle passes: 240 cycles, as three one-pass instructions take; a token
    it signals comes at the end of the last pass."""
    rep = {**_matmul(64), "repeat": 3, "c_step": 1024, "signal": ["c"]}
    cores = {0: {"pt0": [rep]}, 1: {"sfu1": [{"op": "exp", "a": 0, "out": 128, "sticks": 1, "wait": ["c"]}]}}
    assert run_units(tiny, cores).total_cycles == 3 * 80 + 8
    assert run_units(tiny, {0: {"pt0": [_matmul(64)] * 3}}).total_cycles == 3 * 80


@pytest.mark.parametrize(("op", "cycles"), [("add", 4 + 5 * 1), ("exp", 4 + 5 * 4), ("reduce_sum", 4 + 5 * 1)])
def test_sfu_op(tiny, run_units, op, cycles):
    ins = {"op": op, "a": 0, "out": 4096, "sticks": 5}
    if op == "add":
        ins["b"] = 8192
    assert run_units(tiny, {0: {"sfu0": [ins]}}).total_cycles == cycles


@pytest.mark.parametrize("op", ["add", "exp", "sigmoid", "reduce_sum", "lanes_max"])
def test_sfu_pass_on_the_shipped_config_costs_16_a_stick_whatever_the_class(spyre, run_units, op):
    """configs/spyre.toml (docs/decisions/sfu.md): latency 4, then 16 cycles per stick on one SFU for
    every class, transcendental or not: 5 sticks, 4 + 5 * 16 = 84 cycles; two SFUs of a core run side
    by side, so a core passes a stick every 8 cycles."""
    ins = {"op": op, "a": 0, "out": 4096, "sticks": 5, **({"b": 8192} if op == "add" else {})}
    assert run_units(spyre, {0: {"sfu0": [ins]}}).total_cycles == 4 + 5 * 16
    both = {0: {"sfu0": [ins], "sfu1": [{**ins, "out": 16384}]}}
    assert run_units(spyre, both).total_cycles == 4 + 5 * 16


@pytest.mark.parametrize("flags", [{}, {"b_splat": True}, {"b_splat": True, "b_broadcast": True}])
def test_a_splatted_operand_costs_no_extra_pass(spyre, run_units, flags):
    """An operand read with lane 0 splatted (the LX load unit splats as it reads: docs/decisions/sfu.md)
    takes the op's own time: sub over 5 sticks, 4 + 5 * 16 = 84 cycles on configs/spyre.toml, with or
    without the splat."""
    ins = {"op": "sub", "a": 0, "b": 8192, "out": 4096, "sticks": 5, **flags}
    assert run_units(spyre, {0: {"sfu0": [ins]}}).total_cycles == 4 + 5 * 16


@pytest.mark.parametrize(("ins", "cycles"), [
    ({"op": "add", "b": 8192, "dtype": "fp32"}, 4 + 5 * 1),       # fp32: 32 elements a stick, same stick cost
    ({"op": "rsqrt", "dtype": "fp32"}, 4 + 5 * 4),
    ({"op": "cos", "dtype": "fp32"}, 4 + 5 * 4),                  # transcendental
    ({"op": "widen_lo", "dtype": "fp16", "out_dtype": "fp32"}, 4 + 5 * 1),  # simple, per output stick
    ({"op": "narrow", "b": 8192, "dtype": "fp32", "out_dtype": "bf16"}, 4 + 5 * 1),
])
def test_fp32_and_cast_ops_cost_their_class_per_output_stick(tiny, run_units, ins, cycles):
    """A cast fp16 -> fp32 of 5 input sticks is widen_lo and widen_hi, 5 output sticks each: 2 x (4 + 5)."""
    ins = {"a": 0, "out": 16384, "sticks": 5, **ins}
    assert run_units(tiny, {0: {"sfu0": [ins]}}).total_cycles == cycles
    hi = {**ins, "op": "widen_hi", "out": 16384 + 5 * 128}
    if ins["op"] == "widen_lo":
        assert run_units(tiny, {0: {"sfu0": [ins, hi]}}).total_cycles == 2 * cycles


def test_token_orders_units_and_cores(tiny, run_units):
    """A PT pass (80) signals core 1's SFU exp of one stick (4 + 4): 88 in all."""
    cores = {0: {"pt0": [{**_matmul(64), "signal": ["c"]}]},
             1: {"sfu1": [{"op": "exp", "a": 0, "out": 128, "sticks": 1, "wait": ["c"]}]}}
    log = run_units(tiny, cores)
    assert log.total_cycles == 88
    assert int(log.unit_stats[log.unit_names.index("core1.sfu1"), 1]) == 80  # stalled on the token


def test_fifo_fills_and_stalls_its_producer(tiny, run_units):
    """LX->FIFO pushes 32 sticks at one per cycle into a 4-deep FIFO; the SFU's exp pops one
    every 4 cycles (first at cycle 1, when stick 0 became visible): pops at 1 + 4j.
    Stick i < 5 is pushed at cycle i (slot freed at 1 lets stick 4 in); after that the
    producer finds the FIFO full each cycle and pushes stick i at pop i - 4, cycle 1 + 4(i-4).
    Stick 31 is pushed at 109: the producer ends at 110, having stalled 3 cycles before each
    of sticks 6..31 (26 * 3 = 78). The SFU's last pop is at 125; it ends 4 + 4 later, 133."""
    cores = {0: {"lx2fifo0": [{"op": "lx2fifo", "lx": 0, "bytes": 32 * 128}],
                 "sfu0": [{"op": "exp", "a": "fifo", "out": 8192, "sticks": 32}]}}
    log = run_units(tiny, cores)
    assert log.end.tolist() == [110, 133]
    producer = log.unit_names.index("core0.lx2fifo0")
    assert int(log.unit_stats[producer, 3]) == 78  # stalled for room
    assert int(log.unit_stats[producer, 0]) == 110 - 78  # busy excludes the stalls


def test_deep_fifo_never_stalls_producer(tiny_with, run_units):
    machine = tiny_with("fifo.depth_sticks=64")
    cores = {0: {"lx2fifo0": [{"op": "lx2fifo", "lx": 0, "bytes": 32 * 128}],
                 "sfu0": [{"op": "exp", "a": "fifo", "out": 8192, "sticks": 32}]}}
    log = run_units(machine, cores)
    assert log.end.tolist() == [32, 133]


def test_pcie_h2d(tiny, run_units):
    """64 B/cycle, no TLP overhead: a stick every 2 cycles after the 10-cycle latency.
    Sticks leave the pcie stop at 10 and 12, reach mc0 (1 hop) at 12 and 14; the 2-stick
    chunk is written: ACT 14, column 24, data 27..35: done 35."""
    log = run_units(tiny, {}, buffers={"x": {"bytes": 256}}, host=[{"op": "h2d", "dram": "x", "bytes": 256}])
    assert log.total_cycles == 35


def test_sfu_on_lx_equals_the_per_stick_fifo_stream(tiny_with, run_units):
    """The one-event SFU op on LX operands is exact: streaming the same sticks one by one
    through a FIFO the mover never lets run dry gives the same SFU occupancy, shifted by
    the one cycle the first stick takes to become visible in the FIFO."""
    machine = tiny_with("fifo.depth_sticks=64")
    for op, n in (("exp", 7), ("add", 5), ("relu", 16)):
        extra = {"b": 65536} if op == "add" else {}
        lx = run_units(machine, {0: {"sfu0": [{"op": op, "a": 0, "out": 8192, "sticks": n, **extra}]}})
        fifo = run_units(machine, {0: {"lx2fifo0": [{"op": "lx2fifo", "lx": 0, "bytes": n * 128}],
                                       "sfu0": [{"op": op, "a": "fifo", "out": 8192, "sticks": n, **extra}]}})
        assert fifo.end[1] == lx.total_cycles + 1, op


def test_deep_fifo_with_long_latency_fits_the_event_table(tiny_with, run_units):
    """Every stick in a FIFO may be waiting to become visible: the event table counts them."""
    machine = tiny_with("fifo.depth_sticks=4096", "sfu.latency_cycles=100000", "dma.max_inflight_bytes=4096")
    n = 4096
    cores = {0: {"lx2fifo0": [{"op": "lx2fifo", "lx": 0, "bytes": n * 128}],
                 "sfu0": [{"op": "relu", "a": "fifo", "out": "fifo", "sticks": n}],
                 "fifo2lx0": [{"op": "fifo2lx", "lx": 0, "bytes": n * 128}]}}
    # The SFU pops at 1..4096 and its sticks become visible 1 + 100000 cycles later;
    # the last is popped by fifo2lx at 4096 + 100001 and lands one cycle after.
    assert run_units(machine, cores).total_cycles == 4096 + 100001 + 1


def test_engine_opcodes_match_the_unit_program_table():
    assert {op.name: op.value for op in Op} == {n[3:]: getattr(layout, n) for n in dir(layout) if n.startswith("OP_")}
