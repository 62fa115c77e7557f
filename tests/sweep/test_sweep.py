"""Sweeps: every executor gives the same table, rows equal direct runs, done points are not redone,
and bad spaces are one-line errors."""

from __future__ import annotations

import importlib.util
import io
import json
import os

import pytest

from spyre_emu import memo
from spyre_emu.config import load_machine
from spyre_emu.errors import ConfigError
from spyre_emu.pipeline import parse, run
from spyre_emu.sweep import MatmulTask, ProgramTask, Table, grid_search, sweep, to_tune, tune_trainable
from spyre_emu.sweep import executors as executors_module
from spyre_emu.sweep.plots import heatmap, line, pareto, pareto_front
from spyre_emu.validation.workloads import matmul_program
from tests.conftest import ROOT

SMALL = {"M": 64, "N": 256, "K": 256}
SPACE = {"split_m": grid_search([1, 2, 4]), "split_n": grid_search([1, 4]),
         "dram.interleave_bytes": grid_search([256, 512])}
MLP = str(ROOT / "examples" / "programs" / "mlp_gelu_kernels.json")


def _needs(module: str):
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{module} is a test extra and must be installed in CI")
        pytest.skip(f"{module} is not installed")


def test_a_row_is_the_run_of_its_point():
    table = sweep({"split_m": grid_search([1, 2])}, MatmulTask(), fixed=SMALL, workers=1, cache=False).table
    for row in table.records():
        machine = load_machine()
        report = run(parse(matmul_program(1, 64, 256, 256, (1, row["split_m"], 1, 1)), machine, "x"), machine,
                     cache=False).report.data
        assert (row["cycles"], row["cores"], row["error"]) == (report["total_cycles"], row["split_m"], "")
        assert row["latency_us"] == round(report["latency_us"], 6)


@pytest.mark.parametrize("executor", ["local", "dask", "ray"])
def test_every_executor_gives_the_same_table(executor):
    if executor != "local":
        _needs({"dask": "distributed", "ray": "ray"}[executor])
    one = sweep(SPACE, MatmulTask(), fixed=SMALL, workers=1, cache=False)
    other = sweep(SPACE, MatmulTask(), fixed=SMALL, executor=executor, workers=2, cache=False)
    assert other.table.encode(".csv") == one.table.encode(".csv")
    assert len(other.table.rows) == 12
    assert other.stats.points == 12
    assert len(other.stats.warm_s) == 2  # each worker process warmed once, timed apart


def test_ray_tune_runs_the_same_points(tmp_path):
    _needs("ray")
    ray = importlib.import_module("ray")
    tune = importlib.import_module("ray.tune")
    space = {"split_m": grid_search([1, 2]), "split_n": grid_search([1, 4])}
    tuner = tune.Tuner(tune_trainable(MatmulTask(), SMALL), param_space=to_tune(space),
                       tune_config=tune.TuneConfig(metric="latency_us", mode="min"),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))
    try:
        results = tuner.fit()
    finally:
        ray.shutdown()
    got = sorted((r.config["split_m"], r.config["split_n"], r.metrics["cycles"]) for r in results)
    want = sweep(space, MatmulTask(), fixed=SMALL, workers=1, cache=False).table
    assert got == sorted(zip(want.column("split_m"), want.column("split_n"), want.column("cycles"), strict=True))
    best = want.best().records()[0]
    assert results.get_best_result().config == {"split_m": best["split_m"], "split_n": best["split_n"]}


def test_a_point_the_card_cannot_run_is_a_row_with_its_error():
    table = sweep({"split_m": grid_search([1, 64])}, MatmulTask(), fixed={"M": 4096, "N": 64, "K": 64},
                  workers=1, cache=False).table
    rows = table.records()
    assert rows[0]["error"] == ""
    assert rows[0]["cycles"] > 0
    assert rows[1]["error"] == "work division needs 64 cores; the card has 32"
    assert rows[1]["cycles"] is None
    assert table.best().records() == [rows[0]]


def test_a_sweep_run_again_simulates_only_new_points(tmp_path, monkeypatch):
    monkeypatch.setenv("SPYRE_EMU_RESULT_CACHE", "1")
    monkeypatch.setenv("SPYRE_EMU_CACHE", str(tmp_path))
    memo.clear_memory()
    first = sweep({"split_m": grid_search([1, 2])}, MatmulTask(), fixed=SMALL, workers=1)
    memo.clear_memory()  # from the disk, as another process would see it
    calls = []
    real = MatmulTask.__call__
    monkeypatch.setattr(MatmulTask, "__call__", lambda self, p: calls.append(p) or real(self, p))
    grown = sweep({"split_m": grid_search([1, 2, 4])}, MatmulTask(), fixed=SMALL, workers=1)
    assert calls == [{**SMALL, "split_m": 4}]
    assert grown.stats.cached == 2
    assert grown.table.rows[:2] == first.table.rows
    memo.clear_memory()


def test_split_gives_the_four_divisions_at_once():
    table = sweep({"split": grid_search([[1, 2, 4, 1], [1, 1, 1, 2]])}, MatmulTask(), fixed=SMALL, workers=1,
                  cache=False).table
    by_keys = sweep({"split_m": grid_search([2]), "split_n": grid_search([4])}, MatmulTask(), fixed=SMALL,
                    workers=1, cache=False).table
    assert table.column("cycles")[0] == by_keys.column("cycles")[0]
    assert table.column("cores") == [8, 2]
    with pytest.raises(ConfigError, match="split_m: give split or split_m, not both"):
        sweep({"split": grid_search([[1, 2, 4, 1]]), "split_m": 2}, MatmulTask(), fixed=SMALL, workers=1, cache=False)


def test_a_program_task_sets_a_kernels_division():
    table = sweep({"division.matmul.mb": grid_search([1, 8])}, ProgramTask(MLP), workers=1, cache=False).table
    one, eight = table.records()
    assert one["error"] == eight["error"] == ""
    assert eight["latency_us"] < one["latency_us"]


@pytest.mark.parametrize(("space", "fixed", "message"), [
    ({"split_q": grid_search([1])}, SMALL, "space.split_q: unknown parameter for a matmul sweep"),
    ({"split_m": grid_search([1.5])}, SMALL, "space.split_m: expected a positive integer, got 1.5"),
    ({"dram.channelz": grid_search([8])}, SMALL, "space.dram.channelz: unknown key 'dram.channelz'"),
    ({"dram.channels": grid_search(["many"])}, SMALL, "space.dram.channels: expected"),
    ({"split_m": grid_search([1])}, {"M": 64}, "a matmul sweep needs N, K (in the space or fixed)"),
    ({"M": grid_search([1])}, SMALL, "M: a key is both fixed and swept"),
])
def test_bad_spaces_are_one_line_errors(space, fixed, message):
    with pytest.raises(ConfigError) as err:
        sweep(space, MatmulTask(), fixed=fixed, workers=1, cache=False)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_a_program_task_sets_a_tensors_layout():
    """A restickify from x (default layout) to y (stick dim 0): with x already in y's layout
    (dim_order [1, 0]) it copies whole runs, in other instructions; the default order is the file's
    program; a layout the lowering refuses is a row with its error."""
    task = ProgramTask(str(ROOT / "examples" / "programs" / "restickify_kernels.json"))
    default, same = sweep({"layout.x": grid_search([[0, 1], [1, 0]])}, task, workers=1, cache=False).table.records()
    machine = load_machine()
    plain = run(parse(task.kernel_program({}), machine, "x"), machine, cache=False).report.data
    assert default["cycles"] == plain["total_cycles"]
    assert same["error"] == ""
    assert same["instructions"] != default["instructions"]
    refused = sweep({"layout.w": grid_search([[1, 0]])}, ProgramTask(MLP), workers=1, cache=False).table.records()
    assert refused[0]["error"].startswith("matmul lowers 2-D or batched 3-D fp16/bf16 operands in torch-spyre's")
    with pytest.raises(ConfigError, match=r"space.layout.w: expected a dim_order, a permutation of 0..1, got \[0, 0\]"):
        sweep({"layout.w": grid_search([[0, 0]])}, ProgramTask(MLP), workers=1, cache=False)
    with pytest.raises(ConfigError, match="space.layout.q: no tensor 'q'"):
        sweep({"layout.q": grid_search([[0, 1]])}, ProgramTask(MLP), workers=1, cache=False)


def test_program_task_keys_name_its_kernels_and_dims():
    with pytest.raises(ConfigError, match=r"space.division.matmull.mb: no kernel 'matmull' in .*mlp_gelu"):
        sweep({"division.matmull.mb": grid_search([1])}, ProgramTask(MLP), workers=1, cache=False)
    with pytest.raises(ConfigError, match=r"kernel 'matmul' has no dim 'x'; it has mb, in, out"):
        sweep({"division.matmul.x": grid_search([1])}, ProgramTask(MLP), workers=1, cache=False)


def test_unknown_executor_is_an_error():
    with pytest.raises(ConfigError, match="--executor: unknown executor 'spark'"):
        sweep({"split_m": grid_search([1])}, MatmulTask(), fixed=SMALL, executor="spark", cache=False)


def test_tables_write_as_csv_json_and_parquet():
    table = sweep({"split_m": grid_search([1, 2])}, MatmulTask(), fixed=SMALL, workers=1, cache=False).table
    csv = table.encode(".csv").decode().splitlines()
    assert csv[0] == "M,N,K,split_m,latency_us,cycles,cores,instructions,pt_utilization,dram_gb_per_s,error"
    assert len(csv) == 3
    assert csv[1].startswith("64,256,256,1,")
    assert json.loads(table.encode(".json")) == table.records()
    _needs("pyarrow")
    frame = importlib.import_module("pandas").read_parquet(io.BytesIO(table.encode(".parquet")))
    assert frame.to_dict("records") == table.records()


def test_pareto_front_keeps_the_rows_nothing_beats():
    cols = ("cores", "latency_us", "error")
    table = Table(cols, ((1, 100.0, ""), (2, 60.0, ""), (4, 70.0, ""), (8, 30.0, ""), (16, 30.0, ""), (32, 1.0, "x")))
    assert pareto_front(table, "cores").rows == ((1, 100.0, ""), (2, 60.0, ""), (8, 30.0, ""))
    for figure in (line(table, "cores"), heatmap(table, "cores", "latency_us", "cores"), pareto(table, "cores")):
        assert figure.axes


def test_workers_warm_once_per_process(monkeypatch):
    monkeypatch.setattr(executors_module, "_WARMED", [])
    first = executors_module.run_batch((MatmulTask(), [{**SMALL}]))
    again = executors_module.run_batch((MatmulTask(), [{**SMALL}]))
    assert first.warm_s > 0
    assert again.warm_s == 0
    assert first.rows == again.rows
