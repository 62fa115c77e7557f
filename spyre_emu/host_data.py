"""Host data of functional runs: .npy inputs -> device bytes in DRAM buffers, and results back.

Unit programs name raw buffers (their bytes are the array's elements as the card stores them);
kernel programs name tensors, whose host arrays go through the tensor's device layout (sticks,
padding). Either way an fp16 array crosses as the card's DLFloat16 (``numerics.to_card``/``to_host``).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from .config import DTYPE_BYTES
from .engine.functional import Card
from .errors import ProgramError
from .files import open_regular
from .kernel_program import Tensor, from_device, to_device
from .numerics import from_f32, host_array, numpy_dtype, to_card, to_host
from .unit_program import UnitProgram

Outputs = dict[str, tuple[Path, np.ndarray]]
NPY_MAGIC = b"\x93NUMPY"


def read_npy(path: Path, source: str, where: str) -> np.ndarray:
    """One .npy array from a regular file (numpy would call any other file "pickled data")."""
    try:
        with open_regular(path) as handle:
            if handle.read(len(NPY_MAGIC)) != NPY_MAGIC:
                raise ProgramError(f"input {str(path)!r} is not a .npy file", source, where)
            handle.seek(0)
            return np.load(handle, allow_pickle=False)
    except OSError as exc:
        raise ProgramError(f"cannot read input {str(path)!r}: {exc.strerror}", source, where) from None
    except (ValueError, EOFError) as exc:  # truncated, a bad header, or pickled objects
        raise ProgramError(f"cannot read input {str(path)!r}: {exc}", source, where) from None


def _seeded_randn(name: str, count: int) -> np.ndarray:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8]))
    return rng.standard_normal(count).astype(np.float32)


def _check_names(names, known, source: str) -> None:
    for name in names:
        if name not in known:
            raise ProgramError(f"--input names unknown buffer {name!r}", source)


def buffer_inputs(program: UnitProgram, overrides: dict[str, Path]) -> dict[str, np.ndarray]:
    """Bytes of every buffer that has an input file (or a ``fill``), checked against its declaration."""
    _check_names(overrides, program.buffers, program.source)
    out = {}
    for buf in program.buffers.values():
        path = overrides.get(buf.name, buf.input)
        where = f"buffers.{buf.name}.input"
        if path is None:
            count = buf.nbytes // DTYPE_BYTES[buf.dtype]
            if buf.fill == "random":
                out[buf.name] = from_f32(_seeded_randn(buf.name, count), buf.dtype)
            elif not isinstance(buf.fill, str):
                out[buf.name] = from_f32(np.resize(np.asarray(buf.fill, np.float32), count), buf.dtype)
            continue
        array = read_npy(path, program.source, where)
        if array.dtype != np.dtype(numpy_dtype(buf.dtype)):
            raise ProgramError(f"input {str(path)!r} has dtype {array.dtype}, buffer is {buf.dtype}",
                               program.source, where)
        raw = np.ascontiguousarray(to_card(array, buf.dtype)).view(np.uint8).reshape(-1)
        if raw.size > buf.nbytes:
            raise ProgramError(f"input {str(path)!r} has {raw.size} B, buffer holds {buf.nbytes} B",
                               program.source, where)
        out[buf.name] = raw
    return out


def buffer_outputs(card: Card, program: UnitProgram) -> Outputs:
    out = {}
    for buf in program.buffers.values():
        if buf.output is not None:
            raw = card.dram.read(buf.addr, buf.nbytes)
            count = int(np.prod(buf.shape)) if buf.shape else buf.nbytes // DTYPE_BYTES[buf.dtype]
            values = to_host(raw[:count * DTYPE_BYTES[buf.dtype]], buf.dtype).view(numpy_dtype(buf.dtype))
            out[buf.name] = (buf.output, values.reshape(buf.shape) if buf.shape else values)
    return out


def tensor_inputs(program: UnitProgram, tensors: dict[str, Tensor], overrides: dict[str, Path | np.ndarray]
                  ) -> dict[str, np.ndarray]:
    """Device byte images of the input and constant tensors (file, --input, in-memory array, or seeded randn)."""
    _check_names(overrides, tensors, program.source)
    out = {}
    for t in tensors.values():
        if t.role not in ("input", "constant"):
            continue
        where, lay = f"tensors.{t.name}.data", t.layout
        path = overrides.get(t.name, t.data)
        if path is not None:
            array = path if isinstance(path, np.ndarray) else read_npy(path, program.source, where)
            if tuple(array.shape) != lay.shape or array.dtype != np.dtype(numpy_dtype(lay.dtype)):
                raise ProgramError(f"input {_label(path)} is {array.dtype}{list(array.shape)}, tensor is "
                                   f"{lay.dtype}{list(lay.shape)}", program.source, where)
        elif t.init == "randn":
            array = host_array(_seeded_randn(t.name, int(np.prod(lay.shape))), lay.dtype).reshape(lay.shape)
        else:
            continue
        out[t.name] = to_device(to_card(array, lay.dtype), lay)
    return out


def _label(source: Path | np.ndarray) -> str:
    return "array" if isinstance(source, np.ndarray) else repr(str(source))


def tensor_outputs(card: Card, program: UnitProgram, tensors: dict[str, Tensor]) -> Outputs:
    out = {}
    for t in tensors.values():
        if t.role == "output":
            buf = program.buffers[t.name]
            raw = from_device(card.dram.read(buf.addr, buf.nbytes), t.layout)
            out[t.name] = (Path(f"{t.name}.npy"), to_host(raw, t.layout.dtype))
    return out
