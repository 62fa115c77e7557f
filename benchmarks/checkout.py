"""A git revision checked out beside this tree for the length of a benchmark run, and a fresh child process
that measures one."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any


@contextmanager
def reference_checkout(root: Path, revision: str | None) -> Iterator[Path | None]:
    """A temporary worktree of ``revision`` in ``root``'s repository (None: no reference), removed after."""
    if revision is None:
        yield None
        return
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reference"
        subprocess.run(["git", "-C", str(root), "worktree", "add", "-q", "--detach", str(path), revision], check=True)
        try:
            yield path
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", str(path)], check=True)


def child_json(args: list[str], label: str, **run: Any) -> Any:
    """Run ``python <args>`` in a fresh interpreter and return the JSON of its last line of output; a failed
    child stops the benchmark with its stderr, named by ``label``."""
    out = subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False, **run)
    if out.returncode != 0:
        raise SystemExit(f"{label} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def first_module(*names: str) -> ModuleType:
    """The first of ``names`` whose file is in the ``spyre_emu`` this process imports: a child may run against a
    reference checkout older than a module's move (``spyre_emu.validation.calibration`` was
    ``spyre_emu.calibration`` before session 38). Looked up by file, not by trying the import: the editable
    install's finder would otherwise supply the new module from this tree to the old package."""
    root = Path(importlib.import_module("spyre_emu").__file__).parent
    for name in names:
        path = root.joinpath(*name.split(".")[1:])
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return importlib.import_module(name)
    raise ModuleNotFoundError(f"none of {', '.join(names)} in {root}")
