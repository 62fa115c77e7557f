"""The notebooks in examples/ run top to bottom in a fresh kernel, as a user would run them from a
clone, and are committed without outputs (so a diff shows code, not images)."""

import os

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT, SHARED

EXAMPLES = ROOT / "examples"
NEEDS_TORCH = {"frontend"}
NEEDS_CALIBRATION = {"sweeps"}  # reads ../shared/calibration beside the clone
NOTEBOOKS = [pytest.param(path, id=path.stem, marks=[pytest.mark.torch] if path.stem in NEEDS_TORCH else [])
             for path in sorted(EXAMPLES.glob("*.ipynb"))]
CELL_TIMEOUT_S = 300  # a guard against a hung kernel; each notebook takes well under a minute


@pytest.mark.parametrize("path", NOTEBOOKS)
def test_notebook_runs_clean(path):
    notebook = nbformat.read(path, as_version=4)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert [cell.outputs for cell in code if cell.outputs] == []
    assert [cell.execution_count for cell in code if cell.execution_count is not None] == []
    if path.stem in NEEDS_TORCH:
        pytest.importorskip("torch")
    if path.stem in NEEDS_CALIBRATION and not (SHARED / "calibration").is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{SHARED / 'calibration'} is missing; CI has it beside the clone")
        pytest.skip(f"{SHARED / 'calibration'} is not here")
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()  # raises CellExecutionError, naming the cell, when any cell fails
