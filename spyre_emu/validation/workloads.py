"""The measured workloads as programs: a matmul in a forced work division, LX-to-LX ring moves, one pointwise
or row-reduction kernel, one row tile of a softmax chain.

Silicon figures name these workloads in words (a shape, a division, an op, a core count); these builders turn
the words into the kernel or unit program the simulator runs. ``calibration.py`` reads the figures of a data
folder through them and ``examples/make_calibration.py`` writes the DESIGN.md §3 programs with them, so a figure
validate has not seen runs the same program as the one it has.
"""

from __future__ import annotations

from typing import Any

from ..kernel_program import FORMAT as KERNEL_FORMAT
from ..unit_program.load import FORMAT as UNIT_FORMAT

REDUCTIONS = ("sum", "max", "mean", "min")  # along the row (the stick): one value per row


def slice_units(b: int, m: int, n: int, k: int) -> tuple[int, int, int, int]:
    """What a division cuts each dim into: batches, rows, and 64-element sticks of N and K."""
    return b, m, -(-n // 64), -(-k // 64)


def matmul_program(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> dict[str, Any]:
    """C[B, M, N] = A[B, M, K] @ W[B, K, N] in default layouts, divided (b, m, n in sticks, k) as given;
    dims in SuperDSC's order ([x,] mb, out, in, the first varying fastest over the cores). A dim the split
    does not divide is cut as SuperDSC's steady-state and epilogue slices are (the kernel's ``uneven``):
    a measured division ran on the card, so the simulator runs it too."""
    lead = [b] if b > 1 else []
    uneven = any(units % cut for units, cut in zip(slice_units(b, m, n, k), split, strict=True))

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


def fp16_tensor(shape: list[int], role: str, space: str = "dram") -> dict[str, Any]:
    """A tensor of a DESIGN.md §3 program: fp16, random where it is an input (the values time nothing)."""
    return {"shape": shape, "dtype": "fp16", "role": role, "space": space,
            **({"init": "randn"} if role == "input" else {})}


def pointwise_program(op: str, rows: int, cols: int, cores: int, note: str, arity: int = 1) -> dict[str, Any]:
    """One pointwise or row-reduction kernel (torch-spyre's cost-model sweep), rows split over ``cores``; a row
    reduction (``REDUCTIONS``) keeps one value per row."""
    names = ["x", "w"][:arity]
    tensors = {n: {"shape": [rows, cols], "dtype": "fp16", "role": "input", "init": "randn"} for n in names}
    tensors["y"] = {"shape": [rows, 1] if op in REDUCTIONS else [rows, cols], "dtype": "fp16", "role": "output"}
    kernel = {"name": op, "op": op, "inputs": names, "outputs": ["y"], "dims": {"mb": rows, "out": cols},
              "work_division": {"mb": cores}}
    return {"format": KERNEL_FORMAT, "version": 1, "note": note, "tensors": tensors, "kernels": [kernel]}


def softmax_tile_program(extra: int, cores: int, note: str, rows: int = 256, cols: int = 512) -> dict[str, Any]:
    """One row tile of torch-spyre's softmax_stages sweep, as its softmax SDSCs run it
    (../shared/sdsc-examples/softmax): the input cloned to LX (identity), max along the row, sub into a second
    LX tensor, ``extra`` sigmoid stages on it, exp back into the clone's space, sum, realdiv out to DRAM."""
    t = fp16_tensor
    tensors = {"x": t([rows, cols], "input"), "c": t([rows, cols], "intermediate", "lx"),
               "d": t([rows, cols], "intermediate", "lx"), "m": t([rows, 1], "intermediate", "lx"),
               "s": t([rows, 1], "intermediate", "lx"), "y": t([rows, cols], "output")}
    steps = [("identity", ["x"], "c"), ("max", ["c"], "m"), ("sub", ["c", "m"], "d")]
    steps += [("sigmoid", ["d"], "d")] * extra
    steps += [("exp", ["d"], "c"), ("sum", ["c"], "s"), ("realdiv", ["c", "s"], "y")]
    kernels = [{"name": f"k{i}_{op}", "op": op, "inputs": ins, "outputs": [out], "dims": {"mb": rows, "out": cols},
                "work_division": {"mb": cores}} for i, (op, ins, out) in enumerate(steps)]
    return {"format": KERNEL_FORMAT, "version": 1, "tensors": tensors, "kernels": kernels, "note": note}
