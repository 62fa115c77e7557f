"""The numba cache folder: ``$SPYRE_EMU_CACHE/numba-<hash>`` (default ``~/.cache/spyre-emu``), the hash
over every engine source file, because numba's own cache misses edits to a callee in another module (numba
issue #1833). Plain Python: the package computes it without loading numba."""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path


def _cache_dir() -> str:
    sources = sorted(Path(__file__).parent.glob("*.py"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    root = Path(os.environ.get("SPYRE_EMU_CACHE", Path.home() / ".cache" / "spyre-emu"))
    return _writable(root / f"numba-{digest}")


def note(message: str) -> None:
    print(f"spyre-emu: note: {message}", file=sys.stderr)


def _writable(folder: Path) -> str:
    """``folder`` if files can be created in it, else a fresh temporary one (deleted at exit): numba would
    otherwise fall back to a folder beside the sources, or fail at import where that is read-only too."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return str(folder)
    except OSError as exc:
        fresh = tempfile.mkdtemp(prefix="spyre-emu-numba-")
        atexit.register(shutil.rmtree, fresh, ignore_errors=True)
        note(f"cannot write the numba cache {folder} ({exc.strerror}); compiling into {fresh} for this run")
        return fresh


CACHE_DIR = _cache_dir()
