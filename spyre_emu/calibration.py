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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import SpyreEmuError
from .files import read_bytes
from .kernel_program import FORMAT as KERNEL_FORMAT
from .unit_program.load import FORMAT as UNIT_FORMAT

DEFAULT_DATA = Path(__file__).resolve().parents[2] / "shared" / "calibration"
SWEEP, SINGLE = "matmul_split_sweep.csv", "measurements.json"
RING_BYTES = {"ring_shift_128k": 131072, "ring_shift_256k": 262144, "ring_shift_512k": 524288}
SCATTER_BYTES = {"ring_scatter_13mb": 13107200, "ring_scatter_6mb": 6553600}
WHOLE_CALLS = ("launch_phases_mean", "sdpa_encoder_b1", "block_granite_prefill")  # validate_host.py runs them
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


def load_cases(folder: Path) -> tuple[list[Case], dict[str, dict[str, Any]]]:
    """Every single-program case of ``folder``, and the whole calls' entries of measurements.json (and ``QUOTED``)
    by name."""
    cases = [_sweep_case(row) for row in _sweep_rows(folder / SWEEP)]
    singles = _read(folder / SINGLE)
    try:
        entries = {c["name"]: c for c in singles["cases"]}
    except (KeyError, TypeError) as exc:
        raise SpyreEmuError(f"expected {{'cases': [{{'name': ...}}, ...]}} ({exc})", str(folder / SINGLE)) from None
    for name, case in entries.items():
        if name in WHOLE_CALLS:
            continue
        made = _single_case(name, case)
        if made:
            cases.append(made)
    return cases, {**{name: entries[name] for name in WHOLE_CALLS if name in entries}, **QUOTED}


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


def _sweep_case(row: dict[str, str]) -> Case:
    b, m, n, k = (int(row[x]) for x in "BMNK")
    split = tuple(int(row[f"split_{x}"]) for x in "bmnk")
    family = "bmm" if b > 1 else "matmul"
    shape = f"{row['role']} {row['phase']} [{b},{m},{k}]×[{b},{k},{n}]"
    name = f"{row['role']}_{row['phase']}_{'x'.join(map(str, split))}"
    return Case(name, f"{family} {row['phase']}", shape, split, float(row["device_us"]),
                matmul_program(b, m, n, k, split))


def _single_case(name: str, case: dict[str, Any]) -> Case | None:
    """A case for a card-side single figure; the production compiler's (sendnn) own split is not
    published, so its rows run the tuned (4, 8) division of the same shape."""
    if name.startswith(("qo_", "mlp_up_")):
        n = 4096 if name.startswith("qo_") else 12800
        split = case.get("split") or {"b": 1, "m": 4, "n": 8, "k": 1}  # the PR's prefill policy
        split = tuple(split[x] for x in "bmnk")
        return Case(name, "matmul prefill (single)", "", split, float(case["device_us"]),
                    matmul_program(1, 512, n, 4096, split), case.get("pt_util_pct"))
    if name in RING_BYTES:
        return Case(name, "ring", "", None, float(case["device_us"]), ring_shift_program(RING_BYTES[name]))
    if name in SCATTER_BYTES:
        return Case(name, "ring", "", None, float(case["device_us"]), ring_scatter_program(SCATTER_BYTES[name]))
    return None


def matmul_program(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> dict[str, Any]:
    """C[B, M, N] = A[B, M, K] @ W[B, K, N] in default layouts, divided (b, m, n in sticks, k) as given;
    dims in SuperDSC's order ([x,] mb, out, in, the first varying fastest over the cores)."""
    lead = [b] if b > 1 else []

    def tensor(shape: list[int], role: str) -> dict[str, Any]:
        return {"shape": [*lead, *shape], "dtype": "fp16", "role": role}
    dims = {**({"x": b} if b > 1 else {}), "mb": m, "out": n, "in": k}
    division = {**({"x": split[0]} if b > 1 else {}), "mb": split[1], "out": split[2], "in": split[3]}
    return {"format": KERNEL_FORMAT, "version": 1,
            "tensors": {"A": tensor([m, k], "input"), "B": tensor([k, n], "input"), "C": tensor([m, n], "output")},
            "kernels": [{"name": "matmul", "op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"],
                         "dims": dims, "work_division": division}]}


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
