"""`spyre-emu gemm`: one GEMM, C (M x N) = A (M x K) @ B (K x N), built as a program and run on the engine.

On the Spyre card (``[pt] mode = "spyre"``) the GEMM is what a user would write: a kernel program
with A and B in DRAM and one ``batchmatmul`` split over ``cores`` cores, lowered as any other. On a
plain array (``mode = "plain"``) it is what SCALE-Sim times: one PT pass on core 0 with its operands
already in LX (SCALE-Sim's "Total Cycles" leave out loading them from DRAM), so the run takes exactly
the Total Cycles SCALE-Sim v3 reports in CALC mode, and the report adds SCALE-Sim's utilization figures.
"""

from __future__ import annotations

from typing import Any

from .config import DTYPE_BYTES, STICK_BYTES, Machine
from .engine import DEFAULT_MAX_CYCLES, systolic
from .errors import ProgramError
from .kernel_program import FORMAT as KERNEL_FORMAT
from .kernel_program import parse_kernel_program
from .lowering import lower
from .pipeline import run
from .results import Report
from .unit_program.load import FORMAT as UNIT_FORMAT
from .unit_program.load import parse_unit_program

MATMUL_DTYPES = ("fp16", "bf16")  # what the matmul lowering takes; a plain pass takes any PT dtype


def run_gemm(m: int, n: int, k: int, machine: Machine, dtype: str = "fp16", cores: int = 1,
             max_cycles: int = DEFAULT_MAX_CYCLES) -> Report:
    """Simulate the GEMM; the report is ``run``'s plus a ``gemm`` block (and ``systolic`` on a plain array)."""
    source = f"gemm m={m} n={n} k={k}"
    _check(m, n, k, dtype, cores, machine, source)
    if machine.pt.plain:
        units = parse_unit_program(plain_program(m, n, k, dtype), machine, source)
        split = {"mb": 1, "out": 1}
    else:
        split = work_division(m, n, cores, source)
        units = lower(parse_kernel_program(kernel_program(m, n, k, dtype, split), source), machine)
    data = dict(run(units, machine, max_cycles=max_cycles).report.data)
    data["gemm"] = {"m": m, "n": n, "k": k, "dtype": dtype, "cores": cores, "work_division": split}
    if machine.pt.plain:
        data["systolic"] = _systolic(m, n, k, machine)
    return Report(data)


def _check(m: int, n: int, k: int, dtype: str, cores: int, machine: Machine, source: str) -> None:
    for name, value in (("--m", m), ("--n", n), ("--k", k)):
        if value < 1:
            raise ProgramError("must be at least 1", source, name)
    dtypes = tuple(DTYPE_BYTES) if machine.pt.plain else MATMUL_DTYPES
    if dtype not in dtypes:
        raise ProgramError(f"unknown or unsupported dtype {dtype!r}; expected one of {', '.join(dtypes)}",
                           source, "--dtype")
    if not 1 <= cores <= machine.cores.count:
        raise ProgramError(f"must be between 1 and the card's {machine.cores.count} cores", source, "--cores")
    if machine.pt.plain and cores != 1:
        raise ProgramError("a plain array runs the GEMM on one array: use --cores 1", source, "--cores")


def work_division(m: int, n: int, cores: int, source: str) -> dict[str, int]:
    """Slices of M and N (mb * out = cores, whole rows and whole 64-column sticks) that load the least:
    each core reads K x (its rows of A + its columns of B); ties go to more column slices."""
    sticks = -(-n // 64)
    splits = [(mb, cores // mb) for mb in range(1, cores + 1)
              if cores % mb == 0 and m % mb == 0 and sticks % (cores // mb) == 0]
    if not splits:
        raise ProgramError(f"{cores} cores cannot split M = {m} rows and N = {n} columns ({sticks} sticks) "
                           "into equal whole slices", source, "--cores")
    mb, out = min(splits, key=lambda s: (m / s[0] + n / s[1], -s[1]))
    return {"mb": mb, "out": out}


def kernel_program(m: int, n: int, k: int, dtype: str, split: dict[str, int]) -> dict[str, Any]:
    """A and B inputs in DRAM, C written back: one batchmatmul kernel."""
    def tensor(shape: list[int], role: str) -> dict[str, Any]:
        return {"shape": shape, "dtype": dtype, "role": role}
    return {"format": KERNEL_FORMAT, "version": 1,
            "tensors": {"A": tensor([m, k], "input"), "B": tensor([k, n], "input"), "C": tensor([m, n], "output")},
            "kernels": [{"name": "gemm", "op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"],
                         "dims": {"mb": m, "in": k, "out": n}, "work_division": split}]}


def plain_program(m: int, n: int, k: int, dtype: str) -> dict[str, Any]:
    """One pass on core 0's pt0: A (rows of whole sticks), B (packed) and C (rows of whole fp16 sticks) in LX."""
    db = DTYPE_BYTES[dtype]
    a_bytes = m * _sticks(k * db) * STICK_BYTES
    b_bytes = _sticks(k * n * db) * STICK_BYTES
    matmul = {"op": "matmul", "a": 0, "b": a_bytes, "c": a_bytes + b_bytes, "rows": m, "k": k, "cols": n,
              "dtype": dtype}
    return {"format": UNIT_FORMAT, "version": 1, "cores": [{"core": 0, "units": {"pt0": [matmul]}}]}


def _sticks(nbytes: int) -> int:
    return -(-nbytes // STICK_BYTES)


def _systolic(m: int, n: int, k: int, machine: Machine) -> dict[str, Any]:
    """SCALE-Sim's COMPUTE_REPORT figures for the GEMM on the machine's plain array (percentages)."""
    pt = machine.pt
    s = systolic.gemm(m, n, k, pt.pe_rows, pt.pe_cols, pt.dataflow)
    return {"array": [pt.pe_rows, pt.pe_cols], "dataflow": pt.dataflow, "folds": s.folds,
            "fold_cycles": s.fold_cycles, "overall_util_percent": round(100 * s.overall_utilization, 6),
            "mapping_efficiency_percent": round(100 * s.mapping_efficiency, 6),
            "compute_util_percent": round(100 * s.compute_utilization, 6)}
