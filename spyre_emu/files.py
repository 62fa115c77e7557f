"""What the simulator reads and writes on the user's disk (the threat model: docs/reliability.md).

Programs and configs are untrusted input. A path a program names resolves against the program's
own folder and must stay inside it (inputs) or is a plain ``.npy`` file name inside --output-dir
(outputs); paths given on the command line are the user's and go anywhere. Only regular files are
read: a FIFO or a terminal would block forever. Every output is written to a temporary file beside
it and renamed into place, so a killed run leaves the previous output whole; the temporary names
carry the writer's process id, so a later run removes those of runs that died.
"""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import shutil
import signal
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from .errors import ProgramError, SpyreEmuError

TEMP_SUFFIX = ".tmp"
TREE_RETRIES = 20  # concurrent runs swapping the same folder: each retry means another run just won


def program_input(base: Path, name: str, file: str, where: str,
                  elsewhere: str = "; give files elsewhere with --input") -> Path:
    """``name`` (from a program) inside the program's folder ``base``, symbolic links resolved."""
    path = base / name
    # realpath, not Path.resolve: that raises RuntimeError on a link loop, which the read then refuses in one line
    if Path(name).is_absolute() or not Path(os.path.realpath(path)).is_relative_to(os.path.realpath(base)):
        raise ProgramError(f"input {name!r} is outside the program's folder{elsewhere}", file, where)
    return path


def output_name(name: str, file: str, where: str) -> Path:
    """A program's output: one ``.npy`` file name, written inside --output-dir."""
    if Path(name).name != name or name in (".", "..") or not name.endswith(".npy") or name == ".npy":
        raise ProgramError(f"expected a .npy file name (written in --output-dir), got {name!r}", file, where)
    return Path(name)


@contextlib.contextmanager
def open_regular(path: Path) -> Iterator[BinaryIO]:
    """Open a regular file for reading; anything else (FIFO, device, folder) is refused, not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise IsADirectoryError(errno.EISDIR, "is a folder") if path.is_dir() else OSError(
            errno.EINVAL, "not a regular file")
    with os.fdopen(fd, "rb") as handle:
        yield handle


def read_bytes(path: Path) -> bytes:
    with open_regular(path) as handle:
        return handle.read()


def _mode(is_dir: bool) -> int:
    """What open() and mkdir() would give under the user's umask (mkstemp, mkdtemp use 0600, 0700)."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if is_dir else 0o666) & ~umask


def _temp_prefix(path: Path) -> str:
    return f".{path.name}.{os.getpid()}."


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def remove_stale(path: Path) -> None:
    """Delete the temporary files and folders that runs which died left beside ``path``."""
    if not path.parent.is_dir():
        return
    for stray in path.parent.glob(f".{glob.escape(path.name)}.*{TEMP_SUFFIX}"):
        pid = stray.name[len(path.name) + 2:].split(".", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            with contextlib.suppress(OSError):
                shutil.rmtree(stray) if stray.is_dir() and not stray.is_symlink() else stray.unlink()


def distinct_outputs(outputs: dict[str, str | Path | None], inputs: dict[str, str | Path | None]) -> None:
    """Refuse an output that is one of the command's inputs or another of its outputs (the same file by path or
    by link): the run would overwrite what it reads, or one output with another. Keys name the option
    (``--json``) or the input (``the program``); a path of None was not given."""
    seen: dict[object, str] = {}
    for what, path in inputs.items():
        if path is not None:
            seen.setdefault(_identity(Path(path)), what)
    for option, path in outputs.items():
        if path is None:
            continue
        key = _identity(Path(path))
        if key in seen:
            raise SpyreEmuError(f"is also {seen[key]}; give {option} another file", str(path), option)
        seen[key] = option


def _identity(path: Path) -> object:
    """A file that exists is its inode (hard and symbolic links are the same file); one that does not, its path."""
    try:
        st = path.stat()
    except OSError:
        return os.path.realpath(path)  # a link loop too (Path.resolve raises RuntimeError on one)
    return st.st_dev, st.st_ino


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT while outputs are renamed into place: an interrupt then lands after the last rename,
    so a run leaves all of its outputs or none of them.

    Held by Python's handler, not the thread's signal mask: the kernel gives a process-directed signal to any
    thread that does not block it (numba's, a pool's), and Python then runs its handler in the main thread
    anyway, in the middle of the renames."""
    caught: list[int] = []
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    except ValueError:  # not the main thread, where Python delivers signals: nothing lands here to defer
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)  # to the handler the run had: KeyboardInterrupt, or ignored


def write_all(outputs: list[tuple[Path, bytes | np.ndarray]], trees: dict[Path, dict[str, bytes]] | None = None,
              folder: Path | None = None) -> None:
    """Write every output to a temporary file beside it, and every folder of ``trees`` (relative paths -> bytes) to a
    temporary folder beside it, then rename them all into place under one hold of SIGINT: a run leaves all of its
    outputs or none. A path that cannot be written fails the run before any output appears; ``folder`` (--output-dir)
    is created if missing, and removed again then."""
    staged: list[tuple[str, Path]] = []
    folders: list[tuple[Path, Path, Path]] = []  # (fresh, path, where the folder at path goes aside)
    created = [] if folder is None else [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first
    path = done = None
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SpyreEmuError(f"cannot create: {exc.strerror}", str(folder)) from None
    try:
        for path, payload in outputs:
            _stage_file(path, payload, staged)
        for path, files in (trees or {}).items():
            _stage_tree(path, files, folders)
        with interrupts_deferred():
            for tmp, path in staged:
                os.replace(tmp, path)
            for fresh, path, old in folders:
                _swap_in(fresh, path, old)
        done = True
    except OSError as exc:
        raise SpyreEmuError(f"cannot write: {exc.strerror}", str(path)) from None
    finally:
        for tmp, _ in staged:
            Path(tmp).unlink(missing_ok=True)
        for fresh, _, old in folders:
            shutil.rmtree(fresh, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
        for made in created if not done else []:
            with contextlib.suppress(OSError):
                made.rmdir()


def _stage_file(path: Path, payload: bytes | np.ndarray, staged: list[tuple[str, Path]]) -> None:
    """Write ``payload`` to a temporary file beside ``path`` and add it to ``staged``."""
    remove_stale(path)
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if path.exists() and not path.is_file():  # a device or a FIFO: the rename would put a file in its place
        raise OSError(errno.EINVAL, "not a regular file (an output replaces a file)")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX)
    staged.append((tmp, path))
    with os.fdopen(fd, "wb") as handle:
        os.fchmod(handle.fileno(), _mode(False))
        if isinstance(payload, bytes):
            handle.write(payload)
        else:
            np.save(handle, payload, allow_pickle=False)


def _stage_tree(path: Path, files: dict[str, bytes], folders: list[tuple[Path, Path, Path]]) -> None:
    """Write ``files`` (relative paths) into a temporary folder beside ``path``; add (it, path, where the folder at
    path goes aside) to ``folders``."""
    remove_stale(path)
    if path.is_symlink() or (path.exists() and not path.is_dir()):  # it would be moved aside and left there
        raise NotADirectoryError(errno.ENOTDIR, "not a folder (the run puts one there)")
    fresh = Path(tempfile.mkdtemp(dir=path.parent, prefix=_temp_prefix(path), suffix=TEMP_SUFFIX))
    folders.append((fresh, path, fresh.with_name(fresh.name.removesuffix(TEMP_SUFFIX) + ".old" + TEMP_SUFFIX)))
    fresh.chmod(_mode(True))
    for rel, payload in files.items():
        (fresh / rel).parent.mkdir(parents=True, exist_ok=True)
        (fresh / rel).write_bytes(payload)


def _swap_in(fresh: Path, path: Path, old: Path) -> None:
    """Move what is at ``path`` aside and ``fresh`` in; another run may put its folder there in between."""
    for _ in range(TREE_RETRIES):
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(old, ignore_errors=True)
            path.rename(old)
        try:
            fresh.rename(path)
            return
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                raise
    raise OSError(errno.EBUSY, "other runs keep replacing it")
