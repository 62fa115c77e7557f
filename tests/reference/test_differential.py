"""The numba engine and the simpy reference agree on every instruction's start and end cycle.

Random programs (tests/reference/programs.py) run on the tiny and the default card, on two
variants of the tiny card that reach closed pages, refreshes, one-cycle hops, shallow FIFOs,
a small in-flight budget, a long write recovery and a piece setup, and on plain systolic arrays of the
three dataflows: 100 programs, the same ones every run. ``--slow`` adds 200 new ones per card
(1,400) and the examples that take long in simpy.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from spyre_emu import reference
from spyre_emu.config import Machine, load_machine
from spyre_emu.engine import simulate
from spyre_emu.errors import SimulationError
from spyre_emu.pipeline import load_program
from spyre_emu.unit_program import UnitProgram, parse_unit_program
from tests.conftest import ROOT, program
from tests.reference.programs import unit_programs

CONFIGS = {  # name: (file, overrides, CI programs)
    "tiny": ("tiny.toml", [], 25),
    "spyre": ("spyre.toml", [], 25),
    "tiny-closed": ("tiny.toml", ["dram.page_policy=closed", "dram.t_refi_cycles=300", "dram.t_rfc_cycles=40",
                                  "ring.hop_latency_cycles=1", "fifo.depth_sticks=2"], 20),
    "tiny-budget": ("tiny.toml", ["dma.max_burst_bytes=256", "dma.max_inflight_bytes=512",
                                  "dram.t_refi_cycles=500", "sfu.latency_cycles=0", "dram.t_wr_cycles=40",
                                  "dma.piece_setup_cycles=7"], 20),
    "plain-ws": ("plain-systolic.toml", [], 4),
    "plain-os": ("plain-systolic.toml", ["pt.dataflow=os", "pt.pe_rows=8", "pt.pe_cols=16"], 3),
    "plain-is": ("plain-systolic.toml", ["pt.dataflow=is", "pt.pe_cols=8"], 3),
}
SLOW_PROGRAMS = 200  # per config under --slow
EXAMPLES = sorted((ROOT / "examples" / "programs").glob("*.json")) + sorted((ROOT / "docs" / "examples").glob("*.json"))
DMA_OPS = ("load", "store", "send", "h2d", "d2h")
CI_EXAMPLE_BYTES = 1 << 20  # examples moving more (1-3 s of simpy per MB) need --slow


def _machine(name: str) -> Machine:
    file, overrides, _ = CONFIGS[name]
    return load_machine(ROOT / "configs" / file, overrides)


def assert_agree(program: UnitProgram, machine: Machine) -> None:
    log = simulate(program, machine)
    ref = reference.simulate(program, machine)
    engine_times = [(ins.path, int(s), int(e)) for ins, s, e in zip(log.instructions, log.start, log.end, strict=True)]
    ref_times = [(ins.path, s, e) for ins, s, e in zip(log.instructions, ref.start, ref.end, strict=True)]
    differ = [(a, b) for a, b in zip(engine_times, ref_times, strict=True) if a != b]
    assert differ == [], f"(path, start, end) engine vs reference, first of {len(differ)}: {differ[:5]}"
    assert log.total_cycles == ref.total_cycles


def _check_random(name: str, count: int, derandomize: bool) -> None:
    machine = _machine(name)

    @settings(max_examples=count, deadline=None, database=None, derandomize=derandomize,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(unit_programs(machine))
    def check(data: dict) -> None:
        assert_agree(parse_unit_program(data, machine), machine)

    check()


@pytest.mark.parametrize("name", CONFIGS)
def test_random_programs_agree(name):
    _check_random(name, CONFIGS[name][2], derandomize=True)


@pytest.mark.parametrize("name", CONFIGS)
def test_many_random_programs_agree(name, request):
    if not request.config.getoption("--slow"):
        pytest.skip("needs --slow")
    _check_random(name, SLOW_PROGRAMS, derandomize=False)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_examples_agree(spyre, path, request):
    example = load_program(path, spyre)
    moved = sum(ins.args["bytes"] for ins in example.instructions() if ins.op in DMA_OPS)
    if moved > CI_EXAMPLE_BYTES and not request.config.getoption("--slow"):
        pytest.skip(f"moves {moved >> 10} KB: needs --slow")
    assert_agree(example, spyre)


def test_both_find_a_deadlock(tiny, run_units):
    """Eight sticks pushed into a FIFO of four that nothing pops: neither model finishes."""
    cores = {0: {"lx2fifo0": [{"op": "lx2fifo", "lx": 0, "bytes": 8 * 128}]}}
    with pytest.raises(SimulationError, match="deadlock"):
        run_units(tiny, cores)
    with pytest.raises(RuntimeError, match=r"deadlock at cycle 4: cores\[0\].units.lx2fifo0\[0\]"):
        reference.simulate(parse_unit_program(program(cores), tiny), tiny)
