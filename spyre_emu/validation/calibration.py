"""The public silicon measurements of ``../shared/calibration/`` as cases the simulator can run.

``matmul_split_sweep.csv``: one matmul per row (Granite-3.3-8B shapes, a forced work division), its device
time. ``measurements.json``: single figures; those about the card (matmuls and their PT utilization, the
production compiler's time for the same shapes, LX-to-LX ring moves, SFU kernels and SwiGLU MLPs, whose
words ``stated.py`` reads) become cases here, each known by what its ``what`` states (``workloads.py`` builds
its program), one measured two ways as a case per way; the whole calls (a kernel
launch's host phases, a wall time with the host in it, a whole block) are returned as they are, for
host.py, with the one whole call the project quotes from elsewhere (``QUOTED``: issue 12's SwiGLU
range). Nothing here feeds the model: a case is a program and a measured figure.
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import SpyreEmuError
from ..files import read_bytes
from ..unit_program.load import read_json
from .stated import CARD_CORES, SHAPE, cores_problem, sfu_kernel, stated_cores, swiglu
from .workloads import (
    matmul_program,
    ring_scatter_program,
    ring_shift_program,
    split_problem,
    unpublished_split,
)

DEFAULT_DATA = Path(__file__).resolve().parents[3] / "shared" / "calibration"
SWEEP, SINGLE = "matmul_split_sweep.csv", "measurements.json"
SWEEP_COLUMNS = ("role", "phase", "B", "M", "N", "K", "split_b", "split_m", "split_n", "split_k", "device_us")
MOVED = re.compile(r"(\d+)\s*B\b")  # a ring move's bytes, as `what` states them ("131072 B per core")
SPLIT_WORDS = re.compile(r"(?<![a-z])([bmnk])\s*=?\s*(\d+)")  # a division in words: "m8_n4", "m=4, n=8"
SPLIT_TUPLE = re.compile(r"\(b,\s*m,\s*n,\s*k\)\s*=\s*\((\d+),\s*(\d+),\s*(\d+),\s*(\d+)\)")  # as validate prints it
DIVISION = re.compile(r"\((\d+)\s*,\s*(\d+)\s*,\s*(\d+)(?:\s*,\s*(\d+))?\)")  # "(32,1,1)": (m, n, k) or (b, m, n, k)
RATIO_KEYS = ("ratio", "speedup", "speed_up")  # a pair published as the ratio of its two divisions' times alone
GRANITE_NAMES = ("qo_", "mlp_up_")  # an entry so named and stating no shape is that Granite-3.3-8B prefill matmul
WHOLE_CALLS = ("launch_phases_mean", "sdpa_encoder_b1", "block_granite_prefill",  # host.py runs them
               "swiglu_granite_prefill")
QUOTED = {  # whole calls measured on silicon but not in measurements.json, in its format; host.py runs them
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
    pt_util_pct: tuple[float, float | None] | None = None  # measured PT utilization (a value or a range), in %
    source: str = "calibration"       # where the case comes from ("FILE row N"), for its errors
    problem: str = ""                 # why the case cannot run at all ("": it can be tried)
    tiles: int = 1                    # the figure is one launch and this many runs of the program (row tiles)
    ratio: float | None = None        # a pair published as a ratio alone: the first division's time over the second's


def data_files(data: Path) -> tuple[Path | None, Path | None]:
    """The sweep and the single figures ``data`` names: a folder holding ``SWEEP``, ``SINGLE`` or both, or one
    file of either kind by its suffix (a sweep in those columns, or single figures in that format, under any
    name: measurements kept apart need not be renamed to be checked)."""
    if data.is_dir():
        sweep, single = data / SWEEP, data / SINGLE
        if not (sweep.is_file() or single.is_file()):
            raise SpyreEmuError(f"expected a folder holding {SWEEP}, {SINGLE} or both", str(data))
        return (sweep if sweep.is_file() else None), (single if single.is_file() else None)
    if data.is_file() and data.suffix in (".csv", ".json"):
        return (data, None) if data.suffix == ".csv" else (None, data)
    raise SpyreEmuError(f"expected a folder holding {SWEEP}, {SINGLE} or both, or a .csv sweep or .json of single "
                        "figures", str(data))


def load_cases(data: Path) -> tuple[list[Case], dict[str, dict[str, Any]]]:
    """Every single-program case of ``data`` (``data_files``), and the whole calls' entries of its single figures
    (and ``QUOTED``) by name: a sweep with no single figures, or the reverse, is data too."""
    sweep, single = data_files(data)
    rows = _sweep_rows(sweep) if sweep else []
    cases = [_sweep_case(row, f"{sweep} row {line}") for line, row in rows]
    file = str(single)
    singles = _read(single) if single else {"cases": []}
    try:
        listed = [(c["name"], c) for c in singles["cases"]]
    except (KeyError, TypeError) as exc:
        raise SpyreEmuError(f"expected {{'cases': [{{'name': ...}}, ...]}} ({exc})", file) from None
    for i, (name, _) in enumerate(listed):
        if not isinstance(name, str):
            raise SpyreEmuError(f"expected a string, got {name!r}", file, f"cases[{i}].name")
    entries: dict[str, dict[str, Any]] = {}
    first: dict[str, int] = {}
    for i, (name, case) in enumerate(listed):
        if name in first:  # a second figure of one name is listed as not run, never dropped unseen
            why = f"expected a name no other entry has; {name!r} is cases[{first[name]}]'s too"
            cases.append(_unreadable(name, SpyreEmuError(why, file, f"cases[{i}].name")))
            continue
        entries[name], first[name] = case, i
        if name not in WHOLE_CALLS:
            cases += _single_cases(name, case, file)
    return cases, {**QUOTED, **{name: _as_range(entries[name]) for name in WHOLE_CALLS if name in entries}}


def _as_range(entry: dict[str, Any]) -> dict[str, Any]:
    """A whole call's entry with a single PT utilization read as a range of one value (``QUOTED``'s form); the
    file's own figure replaces the quoted one."""
    util = entry.get("pt_util_pct")
    return {**entry, "pt_util_pct": {"low": util, "high": util}} if _number(util) else entry


def _read(path: Path) -> Any:
    try:
        return read_json(path)
    except SpyreEmuError as exc:  # the file's name, then what read_json found (unreadable or invalid JSON)
        raise SpyreEmuError(f"calibration data: {exc.message}", str(path)) from None


def _sweep_rows(path: Path) -> list[tuple[int, dict[str, str]]]:
    """The sweep's rows, each with its line in the file (the csv reader skips blank lines: the count does not)."""
    try:
        text = read_bytes(path).decode()
    except (OSError, SpyreEmuError, UnicodeDecodeError) as exc:
        raise SpyreEmuError(f"cannot read calibration data: {exc}", str(path)) from None
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in SWEEP_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        raise SpyreEmuError(f"expected columns {', '.join(missing)} in the header", str(path))
    rows = [(reader.line_num, row) for row in reader]
    if not rows:
        raise SpyreEmuError("expected a row under the header", str(path))
    return rows


def _sweep_case(row: dict[str, str | None], where: str) -> Case:
    """A row as a case; a row with a field that is not a positive number is a case that cannot run, its reason
    naming the row and the column (the other rows still run: one bad row does not void a sweep)."""
    try:
        dims = [int(_positive(row, x, where)) for x in ("B", "M", "N", "K", *(f"split_{d}" for d in "bmnk"))]
        measured = _positive(row, "device_us", where)
    except SpyreEmuError as exc:
        return _unreadable(f"{row['role']}_{row['phase']}_row{where.rsplit(' ', 1)[-1]}", exc)
    b, m, n, k, *split = dims
    family = "bmm" if b > 1 else "matmul"
    shape = f"{row['role']} {row['phase']} [{b},{m},{k}]×[{b},{k},{n}]"
    name = f"{row['role']}_{row['phase']}_{'x'.join(map(str, split))}"
    return Case(name, f"{family} {row['phase']}", shape, tuple(split), measured,
                matmul_program(b, m, n, k, tuple(split)), source=where, problem=split_problem(b, m, n, k, tuple(split)))


def _unreadable(name: str, error: SpyreEmuError) -> Case:
    """A case whose figure or workload cannot be read: validate lists it as not run, with ``error``'s line."""
    return Case(name, "", "", None, math.nan, {}, source=error.file or "calibration",
                problem=": ".join(part for part in (error.path, error.message) if part))


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


def _single_cases(name: str, case: dict[str, Any], file: str) -> list[Case]:
    """The cases of a card-side single figure; an entry whose ``device_us`` maps names to figures (an old and a
    new work division, two compiler settings) is one case per name, ranked against each other (``_variant``).
    A figure, split or PT utilization of the wrong type makes a case that cannot run, its reason naming the
    entry's JSON path."""
    figures = case.get("device_us")
    if figures is None and _ratio_key(case):
        return _ratio_cases(name, case, file)
    variants = [(name, case, "")] if not isinstance(figures, dict) or not figures else \
        [(f"{name}.{key}", _variant(case, key), name) for key in figures]
    cases = []
    for variant, entry, shape in variants:
        try:
            cases.append(_single_case(variant, entry, file, f"cases[{name}]", shape))
        except SpyreEmuError as exc:  # a figure of the wrong type: this entry is not run, the others are
            cases.append(_unreadable(variant, exc))
    return cases


def _ratio_key(case: dict[str, Any]) -> str | None:
    """The key under which an entry publishes only a ratio of two times (``RATIO_KEYS``), or None."""
    return next((key for key in RATIO_KEYS if key in case), None)


def _ratio_cases(name: str, case: dict[str, Any], file: str) -> list[Case]:
    """A matmul's two divisions published as the ratio of their times alone (an old/new pair, as work-division
    papers quote them): a case per division, with no time of its own, judged together as that ratio."""
    where, key = f"cases[{name}]", _ratio_key(case)
    try:
        if not _number(case[key]):
            raise SpyreEmuError(f"expected a positive ratio of two times, got {case[key]!r}", file, f"{where}.{key}")
        if not (SHAPE.search(str(case.get("what", ""))) or name.startswith(GRANITE_NAMES)):
            raise SpyreEmuError("a ratio alone is judged for a matmul's two divisions; expected a matmul shape "
                                "([M,K] x [K,N]) in `what`", file, where + ".what")
        divisions = _two_divisions(case, file, where)
    except SpyreEmuError as exc:
        return [_unreadable(name, exc)]
    cases = []
    for label, split in divisions:
        try:
            cases.append(replace(_matmul_case(f"{name}.{label}", {**case, "split": split}, file, where, name),
                                 ratio=float(case[key])))
        except SpyreEmuError as exc:
            cases.append(_unreadable(f"{name}.{label}", exc))
    return cases


def _two_divisions(case: dict[str, Any], file: str, where: str) -> list[tuple[str, dict[str, int]]]:
    """A ratio's two divisions, first over second: ``split`` mapping two names to divisions, else two entries
    named so ("old_split", "new_split"), else the two that ``what`` states as tuples ("(32,1,1) time / (8,4,1)
    time": (m, n, k), or (b, m, n, k))."""
    split = case.get("split")
    named = {key.removesuffix("_split"): value for key, value in case.items() if key.endswith("_split")}
    for pair in (split, named):
        if isinstance(pair, dict) and len(pair) == 2 and all(isinstance(v, dict) for v in pair.values()):
            return [(str(label), division) for label, division in pair.items()]
    found = DIVISION.findall(str(case.get("what", "")))
    if split is None and len(found) == 2:
        return [("(" + ",".join(d for d in cuts if d) + ")",
                 dict(zip("bmnk" if cuts[3] else "mnk", map(int, filter(None, cuts)), strict=True)))
                for cuts in found]
    raise SpyreEmuError("expected the ratio's two divisions, first over second: `split` mapping two names to "
                        "divisions, two entries 'NAME_split', or two stated in `what` as (m, n, k) or (b, m, n, k)",
                        file, where + ".split")


def _variant(case: dict[str, Any], key: str) -> dict[str, Any]:
    """The entry as variant ``key`` measured it: its figure and PT utilization under that name where they map
    the variants' names (none where a map leaves the name out); its split under that name, else the division the
    name states in words ("m8_n4", "m=4,n=8"; a dim it leaves out is not split), else the entry's one split."""
    names = set(case["device_us"])

    def of(value: Any) -> Any:
        return value.get(key) if isinstance(value, dict) and names & set(value) else value
    split = case.get("split")
    if not (isinstance(split, dict) and key in split):
        split = _stated_split(str(key)) or split
    return {**case, "device_us": of(case["device_us"]), "split": of(split), "pt_util_pct": of(case.get("pt_util_pct"))}


def _stated_split(text: str) -> dict[str, int] | None:
    """The division ``text`` states, as a split entry ("(b, m, n, k) = (1, 8, 4, 1)", "m=8, n=4", "m8_n4"; a dim
    it leaves out is not split), or None where it states none or names a dim twice."""
    text = text.lower()
    found = SPLIT_TUPLE.search(text)
    if found:
        return dict(zip("bmnk", map(int, found.groups()), strict=True))
    words = SPLIT_WORDS.findall(text)
    return {d: int(cut) for d, cut in words} if words and len({d for d, _ in words}) == len(words) else None


def _single_case(name: str, case: dict[str, Any], file: str, where: str, shape: str = "") -> Case:
    """A case for a card-side single figure, known by what its ``what`` (or, where that states nothing, its name)
    says: a ``qo_``/``mlp_up_`` entry's matmul, a SwiGLU MLP, a matmul shape, a ring move's bytes, a softmax
    chain, a pointwise op or a row reduction. Any other entry is a case with a
    ``problem``: validate lists it as not run rather than dropping it unseen."""
    what = str(case.get("what", ""))
    if name.startswith(GRANITE_NAMES):
        return _matmul_case(name, case, file, where, shape)
    mlp = swiglu(name, what)
    if mlp:
        return Case(name, mlp.category, shape, None, _measured(case, file, where, util_alone=True), mlp.program,
                    _util(case, file, where), f"{file} {where}", mlp.problem)
    if SHAPE.search(what):
        return _matmul_case(name, case, file, where, shape)
    text = f"{name} {what}".lower()
    if "ring" in text and ("shift" in text or "scatter" in text):
        return _ring_case(name, case, file, where, "scatter" in text)
    sfu = sfu_kernel(name, what)
    if sfu:
        return Case(name, sfu.category, shape, None, _measured(case, file, where), sfu.program,
                    source=f"{file} {where}", problem=sfu.problem, tiles=sfu.tiles)
    return Case(name, "", shape, None, math.nan, {}, source=f"{file} {where}",
                problem="no program for this figure: its `what` states no matmul shape ([M,K] x [K,N]), SwiGLU MLP, "
                        "ring shift or scatter, softmax chain, pointwise op or row reduction (as in 'neg of "
                        f"8192×2048, 1 core'); whole calls are run by name ({', '.join(WHOLE_CALLS)})")


def _matmul_case(name: str, case: dict[str, Any], file: str, where: str, shape: str = "") -> Case:
    """The entry's shape with its published split (its ``split``, else the one its ``what`` states after "split"
    or "division"); with none (the production compiler's own, not published), the tuned PR's (4, 8) division,
    or where the shape cannot take it, the division that loads the least."""
    b, m, n, k = _shape(name, case, file, where)
    what = str(case.get("what", "")).lower()
    split, stated = case.get("split"), False
    if split is None:  # stated after "split" in `what` ("K/V decode [64, 4096] × [4096, 1024] with split m=8, n=4")?
        words = re.split(r"\b(?:split|division)\b", what, maxsplit=1)
        split = (len(words) > 1 and _stated_split(words[1])) or None
        stated = split is not None
    if split is None:
        count = stated_cores(what, CARD_CORES)
        if cores_problem(count):
            raise SpyreEmuError(cores_problem(count), file, where + ".what")
        split = unpublished_split(b, m, n, k, count)
    elif isinstance(split, dict) and split and set(split) <= set("bmnk") and all(map(_count, split.values())):
        split = tuple(split.get(x, 1) for x in "bmnk")
    elif stated:
        raise SpyreEmuError("expected a division of positive integers after 'split' or 'division' (as in 'split m=8, "
                            f"n=4'), got {split!r}", file, where + ".what")
    else:
        raise SpyreEmuError(f"expected null or {{'b': ..., 'm': ..., 'n': ..., 'k': ...}} (a dim left out is not "
                            f"split), positive integers, got {split!r}", file, where + ".split")
    phase = "decode" if "decode" in f"{name.lower()} {what}" else "prefill"
    measured, util = _measured(case, file, where, util_alone=True), _util(case, file, where)
    return Case(name, f"{'bmm' if b > 1 else 'matmul'} {phase} (single)", shape, split, measured,
                matmul_program(b, m, n, k, split), util, f"{file} {where}", split_problem(b, m, n, k, split))


def _ring_case(name: str, case: dict[str, Any], file: str, where: str, scatter: bool) -> Case:
    """An LX-to-LX ring move of the bytes ``what`` states (per core for a shift, in all for a scatter), on the
    cores it states (32 where it states none)."""
    what = str(case.get("what", ""))
    moved, count = MOVED.search(what), stated_cores(what, CARD_CORES)
    problem = "" if moved else "expected the bytes moved in `what` (as in '131072 B per core')"
    if not 2 <= count <= CARD_CORES:
        problem = f"a ring move needs 2 to {CARD_CORES} cores; `what` states {count}"
    nbytes = int(moved.group(1)) if moved else 0
    program = {} if problem else (ring_scatter_program if scatter else ring_shift_program)(nbytes, count)
    return Case(name, "ring", "", None, _measured(case, file, where), program, source=f"{file} {where}",
                problem=problem)


def _shape(name: str, case: dict[str, Any], file: str, where: str) -> tuple[int, int, int, int]:
    """(B, M, N, K) from the entry's ``what`` ("matmul [1,512,4096] x [4096,4096]", "[M,K] x [K,N]", or
    batched "[B,M,K] x [B,K,N]"; a 3-D input times a 2-D weight is a linear layer over B × M rows, as
    "decode matmul [4,1,4096]×[4096,25600]" is); where it states none, the Granite-3.3-8B prefill shape its name
    stands for. A shape whose Ks or batches differ, or with a size of 0, is an error naming the entry."""
    found = SHAPE.search(str(case.get("what", "")))
    if not found:
        return 1, 512, 4096 if name.startswith("qo_") else 12800, 4096
    b, m, k, b2, k2, n = (None if g is None else int(g) for g in found.groups())
    b, m = (b, m) if b2 is not None else (1, (1 if b is None else b) * m)
    if k == k2 and b2 in (None, b) and min(b, m, k, n) > 0:
        return b, m, n, k
    raise SpyreEmuError(f"expected [[B,]M,K] x [[B,]K,N] with one K, one B and no size of 0; got {found.group(0)!r}",
                        file, where + ".what")


def _measured(case: dict[str, Any], file: str, where: str, util_alone: bool = False) -> float:
    """The entry's device time in µs; NaN where ``util_alone`` (a matmul or a SwiGLU: work on the PT) and the entry
    publishes only a PT utilization, its one figure."""
    value = case.get("device_us")
    if value is None and _ratio_key(case):
        return math.nan  # judged only as its pair's ratio
    if value is None and case.get("pt_util_pct") is not None:
        if util_alone and _util(case, file, where):
            return math.nan
        raise SpyreEmuError("a PT utilization alone is judged for a matmul or a SwiGLU (work on the PT); expected "
                            "a positive number of microseconds", file, where + ".device_us")
    if not _number(value):
        raise SpyreEmuError(f"expected a positive number of microseconds, got {value!r}", file, where + ".device_us")
    return float(value)


def _util(case: dict[str, Any], file: str, where: str) -> tuple[float, float | None] | None:
    """The entry's measured PT utilization in %, where it publishes one: a value, or a range as ``{"low": 66,
    "high": 79}`` or ``[66, 79]`` (a figure inside it has no error)."""
    util = case.get("pt_util_pct")
    if util is None:
        return None
    if isinstance(util, dict):
        low, high = util.get("low"), util.get("high")
    else:
        low, high = util if isinstance(util, list) and len(util) == 2 else (util, None)
    if not _number(low) or not (high is None or _number(high) and high >= low):
        raise SpyreEmuError(f"expected a positive number, a range {{'low': ..., 'high': ...}} or null, got {util!r}",
                            file, where + ".pt_util_pct")
    return float(low), None if high is None else float(high)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 < value < math.inf


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
