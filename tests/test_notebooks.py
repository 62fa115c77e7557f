"""The notebooks in examples/ run top to bottom in a fresh kernel, as a user would run them from a
clone, and are committed without outputs (so a diff shows code, not images)."""

import nbformat
import pytest
from nbclient import NotebookClient

from tests.conftest import ROOT

EXAMPLES = ROOT / "examples"
NEEDS_TORCH = {"frontend"}
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
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(EXAMPLES)}})
    client.execute()  # raises CellExecutionError, naming the cell, when any cell fails
