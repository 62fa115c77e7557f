"""The result cache (spyre_emu.memo): a cached run equals a fresh one; bad entries are misses."""

from __future__ import annotations

import gc
import json
import pickle

import numpy as np
import pytest

from spyre_emu import memo, pipeline
from spyre_emu.config import load_machine
from spyre_emu.unit_program.model import Instruction
from tests.conftest import ROOT

PROGRAM = ROOT / "examples" / "programs" / "mlp_gelu_kernels.json"


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "1")
    monkeypatch.setenv("SPYRE_EMU_CACHE", str(tmp_path))
    memo.clear_memory()
    yield tmp_path / "results"
    memo.clear_memory()


def _fresh(machine):
    return pipeline.run(pipeline.load(PROGRAM, machine), machine, cache=False)


def _same(a: pipeline.RunResult, b: pipeline.RunResult) -> None:
    assert a.report.to_json() == b.report.to_json()
    for name in pipeline.LOG_FIELDS:
        x, y = getattr(a.log, name), getattr(b.log, name)
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y, name
    assert a.log.instructions == b.log.instructions


def _no_work(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("lowered or simulated although the result was cached")
    monkeypatch.setattr(pipeline, "simulate", refuse)
    monkeypatch.setattr(pipeline, "lower", refuse)


def _counted_lowering(monkeypatch) -> list[str]:
    """The source of every kernel program lowered from now on."""
    lowered, lower = [], pipeline.lower
    def counted(kernels, machine):
        lowered.append(kernels.source)
        return lower(kernels, machine)
    monkeypatch.setattr(pipeline, "lower", counted)
    return lowered


def test_a_cached_run_equals_a_fresh_one(cache_dir, spyre, monkeypatch):
    """A hit, from disk or from memory, neither lowers nor simulates, and gives the fresh run's
    report, event log and instructions exactly."""
    fresh = _fresh(spyre)
    memo.clear_memory()
    for entry in cache_dir.rglob("*.pkl"):
        entry.unlink()
    first = pipeline.run(pipeline.load(PROGRAM, spyre), spyre)  # a miss: lowered, simulated, both stored
    assert len(list(cache_dir.rglob("*.pkl"))) == 2
    memo.clear_memory()
    _no_work(monkeypatch)
    from_disk = pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    from_memory = pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    for run in (first, from_disk, from_memory):
        _same(run, fresh)


def test_functional_runs_replay_on_the_cached_log(cache_dir, spyre):
    fresh = pipeline.run(pipeline.load(PROGRAM, spyre), spyre, functional=True, cache=False)
    pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    cached = pipeline.run(pipeline.load(PROGRAM, spyre), spyre, functional=True)
    _same(cached, fresh)
    assert fresh.outputs.keys() == cached.outputs.keys()
    for name, array in fresh.outputs.items():
        assert np.array_equal(array, cached.outputs[name])


def test_the_machine_is_part_of_the_key(cache_dir, spyre, monkeypatch):
    pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    lowered = _counted_lowering(monkeypatch)
    other = load_machine(None, ["dram.interleave_bytes=1024"])
    _same(pipeline.run(pipeline.load(PROGRAM, other), other), _fresh(other))
    assert len(list(cache_dir.rglob("*.pkl"))) == 4  # a unit program and a result per machine
    assert lowered == [str(PROGRAM)]


def test_the_kernel_program_is_part_of_the_key(cache_dir, spyre, monkeypatch):
    original = pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    lowered = _counted_lowering(monkeypatch)
    data = json.loads(PROGRAM.read_text())
    data["kernels"][0]["work_division"] = {"mb": 4, "out": 8}
    cached = pipeline.run(pipeline.parse(data, spyre, str(PROGRAM)), spyre)
    assert lowered == [str(PROGRAM)]
    fresh = pipeline.run(pipeline.parse(data, spyre, str(PROGRAM)), spyre, cache=False)
    _same(cached, fresh)
    assert cached.report.total_cycles != original.report.total_cycles


@pytest.mark.parametrize("content", [b"", b"not a pickle", b"\x80\x05\x95garbage"])
def test_an_unreadable_entry_is_a_miss(cache_dir, spyre, content):
    pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    for entry in cache_dir.rglob("*.pkl"):  # the unit program and the result
        entry.write_bytes(content)
    memo.clear_memory()
    _same(pipeline.run(pipeline.load(PROGRAM, spyre), spyre), _fresh(spyre))
    memo.clear_memory()
    _same(pipeline.run(pipeline.load(PROGRAM, spyre), spyre), _fresh(spyre))  # rewritten, readable again


def test_the_cache_can_be_turned_off(cache_dir, spyre, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "0")
    pipeline.run(pipeline.load(PROGRAM, spyre), spyre)
    assert not cache_dir.exists()
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "1")
    pipeline.run(pipeline.load(PROGRAM, spyre), spyre, cache=False)
    assert not cache_dir.exists()


def test_an_unwritable_directory_only_loses_the_disk_copy(cache_dir, spyre):
    cache_dir.parent.joinpath("results").write_text("a file where the directory should be")
    _same(pipeline.run(pipeline.load(PROGRAM, spyre), spyre), _fresh(spyre))


def test_lowering_with_the_cache_off_does_not_read_a_stored_unit_program(cache_dir, spyre, monkeypatch):
    """The front end's ``cache=False`` lowers afresh even when a unit program is stored for the same
    kernel program; with the cache on, the stored one is read and nothing is lowered."""
    pipeline.run(pipeline.load(PROGRAM, spyre), spyre)  # stores the unit program and the result
    lowered = _counted_lowering(monkeypatch)
    kernels = pipeline.parse_kernel_program(json.loads(PROGRAM.read_text()), str(PROGRAM))
    pipeline.lowered(kernels, spyre)
    assert lowered == []
    pipeline.lowered(kernels, spyre, cache=False)
    assert lowered == [str(PROGRAM)]


def test_the_collector_is_paused_inside_and_left_as_it_was():
    assert gc.isenabled()
    inside = []

    def fail():
        with memo.collector_paused():
            inside.append(gc.isenabled())
            raise RuntimeError
    with pytest.raises(RuntimeError):
        fail()
    assert inside == [False]
    assert gc.isenabled()
    gc.disable()
    try:
        with memo.collector_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # a caller that turned it off keeps it off
    finally:
        gc.enable()


def test_a_lookup_reads_with_the_collector_paused(cache_dir, monkeypatch):
    seen = []
    memo.store("k", {"x": 1})
    memo.clear_memory()
    monkeypatch.setattr(memo.pickle, "load", lambda f: seen.append(gc.isenabled()) or {"x": 1})
    assert memo.lookup("k") == {"x": 1}
    assert seen == [False]
    assert gc.isenabled()


def test_an_instruction_is_slotted_and_pickles_to_an_equal_one():
    """A unit program read from the cache holds thousands of instructions: one object each (no
    ``__dict__``), unpickled through the constructor (model.Instruction.__reduce__), every field kept."""
    ins = Instruction(3, "load", "load", {"dram": 4096, "lx": 0, "bytes": 128, "to": (1, 2)}, ("a",), ("b", "c"),
                      "cores[3].load[7]", "k2_mm")
    assert not hasattr(ins, "__dict__")
    back = pickle.loads(pickle.dumps(ins, protocol=pickle.HIGHEST_PROTOCOL))
    assert back == ins
    assert type(back) is Instruction
    assert [getattr(back, f) for f in Instruction.__slots__] == [getattr(ins, f) for f in Instruction.__slots__]
    assert pickle.loads(pickle.dumps(Instruction(0, "pt0", "matmul", {}, (), (), "p"))).kernel == ""
