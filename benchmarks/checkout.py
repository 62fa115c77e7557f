"""A git revision checked out beside this tree for the length of a benchmark run, and a fresh child process
that measures one."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
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
