"""Design-space sweeps: a space of parameters, a task that simulates a point, an executor that runs
them (local processes by default, Ray or Dask when one machine is not enough), one table of results.

    from spyre_emu.sweep import MatmulTask, grid_search, sweep
    result = sweep({"split_m": grid_search([1, 2, 4]), "split_n": grid_search([1, 8])},
                   MatmulTask(), fixed={"M": 64, "N": 4096, "K": 4096})
    result.table.best()

See docs/sweeps.md.
"""

from .runner import Stats, Sweep, sweep
from .space import choice, expand, grid_search, loguniform, randint, to_tune, tune_trainable, uniform
from .spec import load_spec, run_spec
from .table import Table
from .tasks import MatmulTask, ProgramTask, Task

__all__ = ["MatmulTask", "ProgramTask", "Stats", "Sweep", "Table", "Task", "choice", "expand", "grid_search",
           "load_spec", "loguniform", "randint", "run_spec", "sweep", "to_tune", "tune_trainable", "uniform"]
