"""The public silicon measurements of ``../shared/calibration/`` as cases the simulator can run.

``matmul_split_sweep.csv``: one matmul per row (Granite-3.3-8B shapes, a forced work division),
its device time. ``measurements.json``: single figures; those about the card (tuned prefill
matmuls and their PT utilization, the production compiler's time for the same shapes, LX-to-LX
ring moves) become cases here; the whole calls (a kernel launch's host phases, a wall time with the
host in it, a whole block) are returned as they are, for validate_host.py, with the one whole call the
project quotes from elsewhere (``QUOTED``: issue 12's SwiGLU range). Nothing here feeds the model: a
case is a program and a measured figure.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SpyreEmuError
from .files import read_bytes
from .kernel_program import FORMAT as KERNEL_FORMAT
from .unit_program.load import FORMAT as UNIT_FORMAT

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "calibration"
SWEEP, SINGLE = "matmul_split_sweep.csv", "measurements.json"
SHAPE = re.compile(  # [[B,]M,K] x [[B,]K,N]
    r"\[(?:(\d+),\s*)?(\d+),\s*(\d+)\]\s*[x×@]\s*\[(?:(\d+),\s*)?(\d+),\s*(\d+)\]")
MOVED = re.compile(r"(\d+)\s*B\b")  # a ring move's bytes, as `what` states them ("131072 B per core")
CORES = re.compile(r"(\d+)\s*cores\b")
TUNED_SPLIT = (1, 4, 8, 1)  # the tuned-matmul PR's prefill policy, run where an entry publishes no split
WHOLE_CALLS = ("launch_phases_mean", "sdpa_encoder_b1", "block_granite_prefill",  # validate_host.py runs them
               "swiglu_granite_prefill")
QUOTED = {  # whole calls measured on silicon but not in measurements.json, in its format; validate_host.py runs them
    "swiglu_granite_prefill": {
        "name": "swiglu_granite_prefill",
        "what": "a tuned SwiGLU MLP prefill (gate, up, silu, mul, down)",
        "metric": "PT utilization of the whole MLP (MACs over the card's peak MAC rate times device time), a range",
        "pt_util_pct": {"low": 66.0, "high": 79.0},
        "source": "spyre-emu issue 12: 'a tuned SwiGLU prefill reaches 17 % PT utilization where silicon reaches "
                  "66-79 %' (silicon measurements the project has not seen; shapes, token counts and divisions not "
                  "stated; run here as Granite-3.3-8B's MLP, 512 tokens)",
    },
}


@dataclass(frozen=True)
class Case:
    """One measured figure and the program that reproduces it."""

    name: str
    category: str                 # "matmul prefill", "bmm decode", "ring", ...
    shape: str                    # cases of one shape are ranked against each other ("" for none)
    split: tuple[int, int, int, int] | None
    measured_us: float
    program: dict[str, Any] = field(repr=False)
    pt_util_pct: float | None = None  # measured PT utilization, where published
    source: str = "calibration"       # where the case comes from ("FILE row N"), for its errors
    problem: str = ""                 # why the case cannot run at all ("": it can be tried)


def load_cases(folder: Path) -> tuple[list[Case], dict[str, dict[str, Any]]]:
    """Every single-program case of ``folder``, and the whole calls' entries of measurements.json (and ``QUOTED``)
    by name. The folder holds either file or both: a sweep with no single figures, or the reverse, is data too."""
    present = [path for path in (folder / SWEEP, folder / SINGLE) if path.is_file()]
    if not present:
        raise SpyreEmuError(f"expected a folder holding {SWEEP}, {SINGLE} or both", str(folder))
    rows = _sweep_rows(folder / SWEEP) if folder / SWEEP in present else []
    cases = [_sweep_case(row, f"{folder / SWEEP} row {i}") for i, row in enumerate(rows, 2)]
    singles = _read(folder / SINGLE) if folder / SINGLE in present else {"cases": []}
    try:
        entries = {c["name"]: c for c in singles["cases"]}
    except (KeyError, TypeError) as exc:
        raise SpyreEmuError(f"expected {{'cases': [{{'name': ...}}, ...]}} ({exc})", str(folder / SINGLE)) from None
    if not all(isinstance(name, str) for name in entries):
        raise SpyreEmuError("expected every case's name to be a string", str(folder / SINGLE), "cases")
    for name, case in entries.items():
        if name in WHOLE_CALLS:
            continue
        cases.append(_single_case(name, case, str(folder / SINGLE)))
    return cases, {**QUOTED, **{name: _as_range(entries[name]) for name in WHOLE_CALLS if name in entries}}


def _as_range(entry: dict[str, Any]) -> dict[str, Any]:
    """A whole call's entry with a single PT utilization read as a range of one value (``QUOTED``'s form); the
    file's own figure replaces the quoted one."""
    util = entry.get("pt_util_pct")
    return {**entry, "pt_util_pct": {"low": util, "high": util}} if _number(util) else entry


def _read(path: Path) -> Any:
    try:
        return json.loads(read_bytes(path))
    except (OSError, SpyreEmuError) as exc:
        raise SpyreEmuError(f"cannot read calibration data: {exc}", str(path)) from None
    except ValueError as exc:
        raise SpyreEmuError(f"invalid JSON: {exc}", str(path)) from None


def _sweep_rows(path: Path) -> list[dict[str, str]]:
    try:
        text = read_bytes(path).decode()
    except (OSError, SpyreEmuError, UnicodeDecodeError) as exc:
        raise SpyreEmuError(f"cannot read calibration data: {exc}", str(path)) from None
    rows = list(csv.DictReader(text.splitlines()))
    need = {"role", "phase", "B", "M", "N", "K", "split_b", "split_m", "split_n", "split_k", "device_us"}
    if not rows or need - set(rows[0]):
        raise SpyreEmuError(f"expected columns {', '.join(sorted(need))}", str(path))
    return rows


def _sweep_case(row: dict[str, str | None], where: str) -> Case:
    """A row as a case; a field that is not a positive number is the file's error (one line, naming the row)."""
    b, m, n, k, *split = (int(_positive(row, x, where)) for x in ("B", "M", "N", "K", *(f"split_{d}" for d in "bmnk")))
    family = "bmm" if b > 1 else "matmul"
    shape = f"{row['role']} {row['phase']} [{b},{m},{k}]×[{b},{k},{n}]"
    name = f"{row['role']}_{row['phase']}_{'x'.join(map(str, split))}"
    return Case(name, f"{family} {row['phase']}", shape, tuple(split), _positive(row, "device_us", where),
                matmul_program(b, m, n, k, tuple(split)), source=where, problem=split_problem(b, m, n, k, tuple(split)))


def _positive(row: dict[str, str | None], column: str, where: str) -> float:
    """``row[column]`` as a positive finite number (an integer for the dims and splits)."""
    text = (row.get(column) or "").strip()
    try:
        value = int(text) if column != "device_us" else float(text)
    except ValueError:
        value = 0
    if not 0 < value < math.inf:
        kind = "number" if column == "device_us" else "integer"
        raise SpyreEmuError(f"expected a positive {kind}, got {text!r}", where, column)
    return value


def split_problem(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> str:
    """Why no card can run this division: a dim cut into more slices than it has batches, rows or sticks
    ("": none). A split that leaves slices of unequal size is run as SuperDSC cuts it (``matmul_program``)."""
    names = ("batch", "row", "64-element stick of N", "64-element stick of K")
    for d, size, units, cut, unit in zip("bmnk", (b, m, n, k), _slice_units(b, m, n, k), split, names, strict=True):
        if cut > units:
            return f"split_{d} = {cut} is more than {d.upper()} = {size} allows: each slice needs at least one {unit}"
    return ""


def _slice_units(b: int, m: int, n: int, k: int) -> tuple[int, int, int, int]:
    """What a division cuts each dim into: batches, rows, and 64-element sticks of N and K."""
    return b, m, -(-n // 64), -(-k // 64)


def _single_case(name: str, case: dict[str, Any], file: str) -> Case:
    """A case for a card-side single figure: a matmul whose ``what`` states its shape (or a ``qo_``/``mlp_up_``
    entry, Granite-3.3-8B's prefill shape), or a ring move whose ``what`` states its bytes. Any other entry is
    a case with a ``problem``: validate lists it as not run rather than dropping it unseen."""
    where = f"cases[{name}]"
    what = str(case.get("what", ""))
    if SHAPE.search(what) or name.startswith(("qo_", "mlp_up_")):
        return _matmul_case(name, case, file, where)
    text = f"{name} {what}".lower()
    if "ring" in text and ("shift" in text or "scatter" in text):
        return _ring_case(name, case, file, where, "scatter" in text)
    return Case(name, "", "", None, math.nan, {}, source=f"{file} {where}",
                problem="no program for this figure: its `what` states no matmul shape ([M,K] x [K,N]) and it "
                        f"is no ring shift or scatter; whole calls are run by name ({', '.join(WHOLE_CALLS)})")


def _matmul_case(name: str, case: dict[str, Any], file: str, where: str) -> Case:
    """The entry's shape with its published split; with none (the production compiler's own, not published),
    the tuned PR's (4, 8) division, or where the shape cannot take it, the division that loads the least."""
    b, m, n, k = _shape(name, case)
    split = case.get("split")
    if split is None:
        split = unpublished_split(b, m, n, k)
    elif isinstance(split, dict) and all(_count(split.get(x)) for x in "bmnk"):
        split = tuple(split[x] for x in "bmnk")
    else:
        raise SpyreEmuError(f"expected null or {{'b': ..., 'm': ..., 'n': ..., 'k': ...}}, positive integers, got "
                            f"{split!r}", file, where + ".split")
    util = case.get("pt_util_pct")
    if util is not None and not _number(util):
        raise SpyreEmuError(f"expected a positive number or null, got {util!r}", file, where + ".pt_util_pct")
    phase = "decode" if "decode" in f"{name} {case.get('what', '')}".lower() else "prefill"
    return Case(name, f"{'bmm' if b > 1 else 'matmul'} {phase} (single)", "", split,
                _measured(case, file, where), matmul_program(b, m, n, k, split), util, f"{file} {where}",
                split_problem(b, m, n, k, split))


def unpublished_split(b: int, m: int, n: int, k: int, cores: int = 32) -> tuple[int, int, int, int]:
    """``TUNED_SPLIT`` where every dim takes it evenly; else the even (b, m, n) division of ``cores`` whose core
    reads and writes the fewest elements (ties: more N slices, then more M slices), as a compiler would pick;
    a shape no even division fits keeps ``TUNED_SPLIT``, whose problem validate reports."""
    def even(split: tuple[int, ...]) -> bool:
        return not any(units % cut for units, cut in zip(_slice_units(b, m, n, k), split, strict=True))
    if even(TUNED_SPLIT) and b == 1:
        return TUNED_SPLIT
    splits = [(sb, sm, cores // (sb * sm), 1) for sb in range(1, cores + 1) for sm in range(1, cores // sb + 1)
              if cores % (sb * sm) == 0]
    fits = [s for s in splits if even(s) and (b > 1 or s[0] == 1)]

    def load(s: tuple[int, ...]) -> tuple[float, int, int]:
        batches, rows, cols = b / s[0], m / s[1], n / s[2]
        return batches * (rows * k + k * cols + rows * cols), -s[2], -s[1]
    return min(fits, key=load) if fits else TUNED_SPLIT


def _ring_case(name: str, case: dict[str, Any], file: str, where: str, scatter: bool) -> Case:
    """An LX-to-LX ring move of the bytes ``what`` states (per core for a shift, in all for a scatter), on the
    cores it states (32 where it states none)."""
    what = str(case.get("what", ""))
    moved, cores = MOVED.search(what), CORES.search(what)
    count = int(cores.group(1)) if cores else 32
    problem = "" if moved else "expected the bytes moved in `what` (as in '131072 B per core')"
    if not 2 <= count <= 32:
        problem = f"a ring move needs 2 to 32 cores; `what` states {count}"
    nbytes = int(moved.group(1)) if moved else 0
    program = {} if problem else (ring_scatter_program if scatter else ring_shift_program)(nbytes, count)
    return Case(name, "ring", "", None, _measured(case, file, where), program, source=f"{file} {where}",
                problem=problem)


def _shape(name: str, case: dict[str, Any]) -> tuple[int, int, int, int]:
    """(B, M, N, K) from the entry's ``what`` ("matmul [1,512,4096] x [4096,4096]", "[M,K] x [K,N]", or
    batched "[B,M,K] x [B,K,N]"); where it states none, the Granite-3.3-8B prefill shape its name stands for."""
    found = SHAPE.search(str(case.get("what", "")))
    if found:
        b, m, k, b2, k2, n = (int(g) if g else None for g in found.groups())
        b = b or 1
        if k == k2 and b2 in (None, b) and min(b, m, k, n) > 0:
            return b, m, n, k
    return 1, 512, 4096 if name.startswith("qo_") else 12800, 4096


def _measured(case: dict[str, Any], file: str, where: str) -> float:
    value = case.get("device_us")
    if not _number(value):
        raise SpyreEmuError(f"expected a positive number of microseconds, got {value!r}", file, where + ".device_us")
    return float(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def matmul_program(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> dict[str, Any]:
    """C[B, M, N] = A[B, M, K] @ W[B, K, N] in default layouts, divided (b, m, n in sticks, k) as given;
    dims in SuperDSC's order ([x,] mb, out, in, the first varying fastest over the cores). A dim the split
    does not divide is cut as SuperDSC's steady-state and epilogue slices are (the kernel's ``uneven``):
    a measured division ran on the card, so the simulator runs it too."""
    lead = [b] if b > 1 else []
    uneven = any(units % cut for units, cut in zip(_slice_units(b, m, n, k), split, strict=True))

    def tensor(shape: list[int], role: str) -> dict[str, Any]:
        return {"shape": [*lead, *shape], "dtype": "fp16", "role": role}
    dims = {**({"x": b} if b > 1 else {}), "mb": m, "out": n, "in": k}
    division = {**({"x": split[0]} if b > 1 else {}), "mb": split[1], "out": split[2], "in": split[3]}
    return {"format": KERNEL_FORMAT, "version": 1,
            "tensors": {"A": tensor([m, k], "input"), "B": tensor([k, n], "input"), "C": tensor([m, n], "output")},
            "kernels": [{"name": "matmul", "op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"],
                         "dims": dims, "work_division": division, **({"uneven": True} if uneven else {})}]}


def ring_shift_program(nbytes: int, cores: int = 32) -> dict[str, Any]:
    """Every core sends ``nbytes`` of its LX to the next core's LX (one transfer per link)."""
    units = [{"core": c, "units": {"send": [{"op": "send", "lx": 0, "to_core": (c + 1) % cores,
                                               "to_lx": nbytes, "bytes": nbytes}]}} for c in range(cores)]
    return {"format": UNIT_FORMAT, "version": 1, "cores": units}


def ring_scatter_program(total: int, cores: int = 32) -> dict[str, Any]:
    """An all-to-all scatter of ``total`` bytes: each core sends an equal whole-stick share to every core."""
    share = total // (cores * cores) // 128 * 128
    units = [{"core": c, "units": {"send": [{"op": "send", "lx": 0, "to_core": (c + d) % cores,
                                               "to_lx": 1 << 20, "bytes": share} for d in range(1, cores)]}}
             for c in range(cores)]
    return {"format": UNIT_FORMAT, "version": 1, "cores": units}
