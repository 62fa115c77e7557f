"""Physical invariants on the example programs: never faster than a peak, monotone, deterministic."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from spyre_emu.config import STICK_BYTES
from spyre_emu.engine import simulate
from spyre_emu.pipeline import load_program

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples" / "programs").glob("*.json"))


@pytest.fixture(scope="module")
def example_logs(spyre):
    return {p.stem: simulate(load_program(p, spyre), spyre) for p in EXAMPLES}


def test_examples_exist():
    assert len(EXAMPLES) >= 5


def test_dram_never_beats_its_peak(example_logs, spyre):
    for name, log in example_logs.items():
        moved = int(log.channel_stats[:, 0:2].sum()) * STICK_BYTES
        assert moved <= spyre.dram.peak_bytes_per_cycle() * log.total_cycles, name
        assert (log.channel_stats[:, 2] <= log.total_cycles).all(), name  # data bus busy per channel


def test_links_carry_at_most_one_stick_per_cycle(example_logs):
    for name, log in example_logs.items():
        assert (log.link_stats[:, 0] <= log.total_cycles).all(), name


def test_pt_never_beats_its_peak(example_logs, spyre):
    for name, log in example_logs.items():
        for i, ins in enumerate(log.instructions):
            if ins.op == "matmul":
                macs = 8 * ins.args["k"] * 64
                assert macs <= spyre.pt.macs_per_cycle("fp16") * (log.end[i] - log.start[i]), name


def test_units_run_one_instruction_at_a_time(example_logs):
    """Compute units run one instruction at a time; DMA units may overlap queued ones, but start and
    end them in stream order."""
    for name, log in example_logs.items():
        by_unit: dict = {}
        for i, ins in enumerate(log.instructions):
            by_unit.setdefault((ins.core, ins.unit), []).append((int(log.start[i]), int(log.end[i])))
        for (_, unit), spans in by_unit.items():
            assert all(s <= e for s, e in spans), name
            pairs = list(zip(spans, spans[1:], strict=False))
            if unit in ("load", "store", "send", "pcie"):
                assert all(a[0] <= b[0] and a[1] <= b[1] for a, b in pairs), name
            else:
                assert all(a[1] <= b[0] for a, b in pairs), name


def _read(run_units, machine, nbytes, cores=4):
    loads = {c: {"load": [{"op": "load", "dram": f"x+{c * nbytes}", "lx": 0, "bytes": nbytes}]} for c in range(cores)}
    return run_units(machine, loads, buffers={"x": {"bytes": cores * nbytes}}).total_cycles


def test_more_work_never_takes_fewer_cycles(run_units, spyre):
    cycles = [_read(run_units, spyre, n * 4096) for n in (1, 2, 4, 8, 16, 64)]
    assert cycles == sorted(cycles)
    assert cycles[0] < cycles[-1]


def test_more_cores_do_not_slow_a_split_read(run_units, spyre):
    one = _read(run_units, spyre, 1 << 20, cores=1)
    many = _read(run_units, spyre, (1 << 20) // 16, cores=16)
    assert many < one


def test_same_json_report_in_two_processes(tmp_path):
    program = EXAMPLES[0]
    outs = []
    for n in range(2):
        out = tmp_path / f"r{n}.json"
        subprocess.run([sys.executable, "-m", "spyre_emu.cli", "run", str(program), "--quiet", "--json", str(out)],
                       check=True)
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    assert json.loads(outs[0])["total_cycles"] > 0
