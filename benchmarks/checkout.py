"""A git revision checked out beside this tree for the length of a benchmark run."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


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
