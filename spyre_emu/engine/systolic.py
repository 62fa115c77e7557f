"""The plain systolic array (``[pt] mode = "plain"``): a GEMM's cycles and utilization as SCALE-Sim v3 counts them.

A textbook R x C array maps two of the GEMM's dims onto its rows and columns and streams the third
through it (the dataflow); a GEMM larger than the array runs in folds, one after another, each with
its full fill and drain. SCALE-Sim v3 (CALC bandwidth mode: operands already in SRAM, no stalls)
gives a fold ``lines`` cycles and reports a GEMM's "Total Cycles" as the index of the cycle of its
last output write, ``folds * lines - 1``. The derivation, from SCALE-Sim's code, is in
docs/decisions/plain-systolic.md; tests/engine/test_systolic.py checks it against SCALE-Sim itself.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Mapping:
    """How a GEMM (M x K) @ (K x N) sits on an R x C array: ``spatial_rows`` of one dim on the array's
    rows, ``spatial_cols`` of another on its columns, ``temporal`` streamed through; ``preload`` is the
    cycles spent loading the stationary operand of a fold (R for ws and is, none for os)."""

    spatial_rows: int
    spatial_cols: int
    temporal: int
    preload: int


def mapping(m: int, n: int, k: int, rows: int, dataflow: str) -> Mapping:
    """os keeps C in place (M on rows, N on columns, K streamed); ws keeps B (K on rows, N on columns,
    M streamed); is keeps A (K on rows, M on columns, N streamed): SCALE-Sim's Sr, Sc and T."""
    if dataflow == "os":
        return Mapping(m, n, k, 0)
    if dataflow == "ws":
        return Mapping(k, n, m, rows)
    return Mapping(k, m, n, rows)


def _folds(size: int, per: int) -> int:
    return -(-size // per)


@dataclass(frozen=True)
class Systolic:
    """One GEMM on one plain array: cycles and SCALE-Sim's three utilization figures (fractions)."""

    folds: int
    fold_cycles: int
    total_cycles: int
    mapping_efficiency: float
    compute_utilization: float
    overall_utilization: float


def gemm(m: int, n: int, k: int, rows: int, cols: int, dataflow: str) -> Systolic:
    """SCALE-Sim v3's figures for C (m x n) = A (m x k) @ B (k x n) on a ``rows`` x ``cols`` array.

    A fold streams ``temporal`` values through after its preload and takes ``preload + rows + cols +
    temporal - 2`` cycles (the skew across rows and columns is the fill and drain). Mapping efficiency
    and compute utilization are SCALE-Sim's per-fold averages: the share of PEs a fold maps, and its
    MACs over PEs x the fold's cycles as SCALE-Sim counts them for this figure (one line more per
    array column than the timing for ws and is). Overall utilization is all MACs over PEs x Total Cycles.
    """
    mp = mapping(m, n, k, rows, dataflow)
    folds = _folds(mp.spatial_rows, rows) * _folds(mp.spatial_cols, cols)
    fold_cycles = mp.preload + rows + cols + mp.temporal - 2
    total = folds * fold_cycles - 1
    pes = rows * cols
    # Summed over the grid of folds, the PEs used add up to spatial_rows * spatial_cols.
    mapping_eff = mp.spatial_rows * mp.spatial_cols / (folds * pes)
    util_cycles = fold_cycles + (cols - 1 if mp.preload else 0)
    overall = m * n * k / (total * pes) if total > 0 else 0.0
    return Systolic(folds, fold_cycles, total, mapping_eff, mapping_eff * mp.temporal / util_cycles, overall)
