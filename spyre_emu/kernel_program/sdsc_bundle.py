"""bundle.mlir, torch-spyre's launch plan: which kernel argument and byte offset each SDSC symbol is.

Its operands are SSA values built from the arguments by ``arith.constant``/``arith.addi``; they
are evaluated rather than decoded from their names, which are only a convention.
"""

from __future__ import annotations

import re
from pathlib import Path

from ..errors import ProgramError
from ..files import program_input, read_bytes

_EXECUTE = re.compile(r"sdsc_execute\s*\(([^)]*)\)\s*\{([^}]*)\}")
_DEF = re.compile(r"%(\w+)\s*=\s*(sdscbundle\.input_arg_extract value from %arg_(\d+)_base_addr"
                  r"|arith\.constant\s+(-?\d+)|arith\.addi\s+%(\w+)\s*,\s*%(\w+))")


def read_bundle(directory: Path) -> list[tuple[str, dict[int, tuple[int, int]]]] | None:
    """Per ``sdsc_execute`` in order: its file and ``{symbol id: (argument, byte offset)}``; None
    without a bundle."""
    path = directory / "bundle.mlir"
    if not path.is_file():
        return None
    try:
        text = read_bytes(program_input(directory, path.name, str(path), "", "")).decode(errors="replace")
        values = _ssa_values(text)
    except OSError as exc:
        raise ProgramError(f"cannot read: {exc.strerror}", str(path)) from None
    except ValueError as exc:  # an arith.constant of more than 4300 digits
        raise ProgramError(f"unreadable constant: {exc}", str(path)) from None
    out = []
    for i, m in enumerate(_EXECUTE.finditer(text)):
        where = f"sdsc_execute[{i}]"
        file = re.search(r'sdsc_filename\s*=\s*"([^"]+)"', m.group(2))
        ids = re.search(r'symbol_ids"?\s*=\s*\[([^\]]*)\]', m.group(2))
        if not file or not ids:
            raise ProgramError("sdsc_execute without sdsc_filename or symbol_ids", str(path), where)
        operands = re.findall(r"%(\w+)", m.group(1))
        try:
            id_list = [int(s) for s in ids.group(1).replace(" ", "").split(",") if s]
        except ValueError:
            raise ProgramError("symbol_ids must be a list of integers", str(path), where) from None
        if len(operands) != len(id_list) or any(values.get(o, (None,))[0] is None for o in operands):
            raise ProgramError("operands do not match symbol_ids or are not argument addresses", str(path), where)
        out.append((file.group(1), {s: values[o] for s, o in zip(id_list, operands, strict=True)}))
    if not out:
        raise ProgramError("no sdsc_execute", str(path))
    return out


def _ssa_values(text: str) -> dict[str, tuple[int | None, int]]:
    """``%name -> (argument or None, offset)`` for the address arithmetic of the launch function."""
    values: dict[str, tuple[int | None, int]] = {}
    for name, _, arg, const, lhs, rhs in _DEF.findall(text):
        if arg:
            values[name] = (int(arg), 0)
        elif const:
            values[name] = (None, int(const))
        elif lhs in values and rhs in values:
            (a, x), (b, y) = values[lhs], values[rhs]
            values[name] = (a if a is not None else b, x + y)
    return values
