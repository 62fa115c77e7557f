"""The measured workloads as programs: a matmul in a forced work division (and which divisions a card can run,
and which one a figure that publishes none gets), LX-to-LX ring moves, one pointwise or row-reduction kernel, one
row tile of a softmax chain, a SwiGLU MLP.

Silicon figures name these workloads in words (a shape, a division, an op, a core count); these builders turn
the words into the kernel or unit program the simulator runs. ``calibration.py`` reads the figures of a data
folder through them and ``examples/make_calibration.py`` writes the DESIGN.md §3 programs with them, so a figure
validate has not seen runs the same program as the one it has.
"""

from __future__ import annotations

import math
from typing import Any

from ..kernel_program import FORMAT as KERNEL_FORMAT
from ..kernel_program import default_layout
from ..lowering.spans import MAX_SPAN_BYTES, box_span
from ..unit_program.load import FORMAT as UNIT_FORMAT

REDUCTIONS = ("sum", "max", "mean", "min")  # along the row (the stick): one value per row
TUNED_SPLIT = (1, 4, 8, 1)  # the tuned-matmul PR's prefill policy, run where an entry publishes no split


def slice_units(b: int, m: int, n: int, k: int) -> tuple[int, int, int, int]:
    """What a division cuts each dim into: batches, rows, and 64-element sticks of N and K."""
    return b, m, -(-n // 64), -(-k // 64)


def matmul_program(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> dict[str, Any]:
    """C[B, M, N] = A[B, M, K] @ W[B, K, N] in default layouts, divided (b, m, n in sticks, k) as given."""
    lead = [b] if b > 1 else []
    return {"format": KERNEL_FORMAT, "version": 1,
            "tensors": {"A": tensor([*lead, m, k], "input"), "B": tensor([*lead, k, n], "input"),
                        "C": tensor([*lead, m, n], "output")},
            "kernels": [matmul_kernel("matmul", ["A", "B"], "C", (b, m, n, k), split)]}


def tensor(shape: list[int], role: str) -> dict[str, Any]:
    """An fp16 tensor in DRAM whose values time nothing (no data, no init: the lowering's default)."""
    return {"shape": shape, "dtype": "fp16", "role": role}


def matmul_kernel(name: str, inputs: list[str], output: str, dims: tuple[int, int, int, int],
                  split: tuple[int, ...]) -> dict[str, Any]:
    """A ``batchmatmul`` kernel of (B, M, N, K), its dims in SuperDSC's order ([x,] mb, out, in, the first varying
    fastest over the cores), but K first when it is split: torch-spyre's emitter (``core_id_k_fast_emission``, on
    by default where the sweeps were measured) gives a K group's cores neighbouring ring positions. A dim the split
    does not divide is cut as SuperDSC's steady-state and epilogue slices are (the kernel's ``uneven``): a measured
    division ran on the card, so the simulator runs it too."""
    b, m, n, k = dims
    uneven = any(units % cut for units, cut in zip(slice_units(b, m, n, k), split, strict=True))
    rest = ["x", "mb", "out"] if b > 1 else ["mb", "out"]
    order = ["in", *rest] if split[3] > 1 else [*rest, "in"]
    sizes, cuts = {"x": b, "mb": m, "out": n, "in": k}, dict(zip(("x", "mb", "out", "in"), split, strict=True))
    return {"name": name, "op": "batchmatmul", "inputs": inputs, "outputs": [output],
            "dims": {d: sizes[d] for d in order}, "work_division": {d: cuts[d] for d in order},
            **({"uneven": True} if uneven else {})}


def split_problem(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> str:
    """Why no card can run this division: a dim cut into more slices than it has batches, rows or sticks
    ("": none). A split that leaves slices of unequal size is run as SuperDSC cuts it (``matmul_kernel``)."""
    names = ("batch", "row", "64-element stick of N", "64-element stick of K")
    for d, size, units, cut, unit in zip("bmnk", (b, m, n, k), slice_units(b, m, n, k), split, names, strict=True):
        if cut > units:
            return f"split_{d} = {cut} is more than {d.upper()} = {size} allows: each slice needs at least one {unit}"
    return ""


def span_problem(b: int, m: int, n: int, k: int, split: tuple[int, ...]) -> str:
    """Why the 256 MB rule refuses this division ("": it does not), from the largest slice's box of each operand in
    its default layout (lowering/spans.py; a core's column slice of a weight spans every K row of it)."""
    bs, ms, ns, ks = (-(-units // cut) for units, cut in zip(slice_units(b, m, n, k), split, strict=True))
    lead, first = ([b], [(0, bs)]) if b > 1 else ([], [])
    rows, cols, depth = (0, ms), (0, min(n, 64 * ns)), (0, min(k, 64 * ks))
    for name, shape, box in (("A", [m, k], [rows, depth]), ("B", [k, n], [depth, cols]), ("C", [m, n], [rows, cols])):
        lo, hi = box_span(default_layout([*lead, *shape], "fp16"), [*first, *box])
        if hi - lo > MAX_SPAN_BYTES:
            return f"a core would span {hi - lo} B of {name}; at most {MAX_SPAN_BYTES} B"
    return ""


def unpublished_split(b: int, m: int, n: int, k: int, cores: int = 32) -> tuple[int, int, int, int]:
    """``TUNED_SPLIT`` where every dim takes it evenly on 32 cores; else the (b, m, n) division of ``cores`` whose
    core reads and writes the fewest elements (ties: more N slices, then more M slices), as a compiler would
    pick: an even one where one fits, else one of unequal slices the card can run (SuperDSC's cut). K is split only
    where no such division runs: too few rows and column sticks for the cores, or a core over the 256 MB rule
    (``span_problem``), as torch-spyre's planner splits K for narrow matmuls; a shape no division of ``cores``
    fits keeps ``TUNED_SPLIT``, whose problem validate reports."""
    units = slice_units(b, m, n, k)

    def even(split: tuple[int, ...]) -> bool:
        return not any(size % cut for size, cut in zip(units, split, strict=True))

    def runs(split: tuple[int, ...]) -> bool:
        return not split_problem(b, m, n, k, split) and (b > 1 or split[0] == 1) and not span_problem(b, m, n, k, split)
    if even(TUNED_SPLIT) and b == 1 and cores == 32 and runs(TUNED_SPLIT):
        return TUNED_SPLIT
    splits = [(sb, sm, sn, cores // (sb * sm * sn)) for sb in range(1, cores + 1) for sm in range(1, cores + 1)
              for sn in range(1, cores + 1) if cores % (sb * sm * sn) == 0]
    runnable = [s for s in splits if s[3] == 1 and runs(s)] or [s for s in splits if runs(s)]
    fits = [s for s in runnable if even(s)] or runnable

    def load(s: tuple[int, ...]) -> tuple[float, int, int, int]:
        batches, rows = -(-b // s[0]), -(-m // s[1])
        cols, depth = (-(-units[i] // s[i]) * 64 for i in (2, 3))
        return batches * (rows * depth + depth * cols + rows * cols), s[3], -s[2], -s[1]
    return min(fits, key=load) if fits else TUNED_SPLIT


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
    """One pointwise or row-reduction kernel (torch-spyre's cost-model sweep), rows split over ``cores`` (slices
    that differ by one row where they do not divide); a row reduction (``REDUCTIONS``) keeps one value per row."""
    names = ["x", "w"][:arity]
    tensors = {n: {"shape": [rows, cols], "dtype": "fp16", "role": "input", "init": "randn"} for n in names}
    tensors["y"] = {"shape": [rows, 1] if op in REDUCTIONS else [rows, cols], "dtype": "fp16", "role": "output"}
    kernel = {"name": op, "op": op, "inputs": names, "outputs": ["y"], "dims": {"mb": rows, "out": cols},
              "work_division": {"mb": cores}, **({"uneven": True} if rows % cores else {})}
    return {"format": KERNEL_FORMAT, "version": 1, "note": note, "tensors": tensors, "kernels": [kernel]}


def softmax_tile_program(extra: int, cores: int, note: str, rows: int = 256, cols: int = 512) -> dict[str, Any]:
    """One row tile of torch-spyre's softmax_stages sweep, as its softmax SDSCs run it
    (../shared/sdsc-examples/softmax): the input cloned to LX (identity), max along the row, sub into a second
    LX tensor, ``extra`` sigmoid stages on it, exp back into the clone's space, sum, realdiv out to DRAM; rows split
    over ``cores`` as in ``pointwise_program``."""
    t = fp16_tensor
    tensors = {"x": t([rows, cols], "input"), "c": t([rows, cols], "intermediate", "lx"),
               "d": t([rows, cols], "intermediate", "lx"), "m": t([rows, 1], "intermediate", "lx"),
               "s": t([rows, 1], "intermediate", "lx"), "y": t([rows, cols], "output")}
    steps = [("identity", ["x"], "c"), ("max", ["c"], "m"), ("sub", ["c", "m"], "d")]
    steps += [("sigmoid", ["d"], "d")] * extra
    steps += [("exp", ["d"], "c"), ("sum", ["c"], "s"), ("realdiv", ["c", "s"], "y")]
    uneven = {"uneven": True} if rows % cores else {}
    kernels = [{"name": f"k{i}_{op}", "op": op, "inputs": ins, "outputs": [out], "dims": {"mb": rows, "out": cols},
                "work_division": {"mb": cores}, **uneven} for i, (op, ins, out) in enumerate(steps)]
    return {"format": KERNEL_FORMAT, "version": 1, "tensors": tensors, "kernels": kernels, "note": note}


def swiglu_problem(batch: int, tokens: int, hidden: int, inter: int, cores: int = 32) -> str:
    """Why no card can run ``swiglu_program``'s matmuls in the divisions it gives them ("": none)."""
    for n, k in ((inter, hidden), (hidden, inter)):
        problem = split_problem(batch, tokens, n, k, unpublished_split(batch, tokens, n, k, cores))
        if problem:
            return problem
    return ""


def swiglu_program(batch: int, tokens: int, hidden: int, inter: int, note: str, cores: int = 32) -> dict[str, Any]:
    """A SwiGLU MLP, y = down(silu(gate(x)) · up(x)), as one kernel program in default layouts: each matmul in
    the division a compiler picks where none is published (``unpublished_split``), silu and the product over
    batches, rows and column sticks of the intermediate, as many of ``cores`` as divide each in turn. With
    ``batch`` > 1 every batch has its own weights (a batched MLP, as torch-spyre's perf suite defines its MLP op)
    and the matmuls are batched."""
    lead, x = ([batch], {"x": batch}) if batch > 1 else ([], {})

    def matmul(name: str, a: str, w: str, out: str, n: int, k: int) -> dict[str, Any]:
        return matmul_kernel(name, [a, w], out, (batch, tokens, n, k), unpublished_split(batch, tokens, n, k, cores))
    division, left = {}, cores
    for dim, units in {**x, "mb": tokens, "out": slice_units(1, 1, inter, 1)[2]}.items():
        division[dim] = math.gcd(units, left)
        left //= division[dim]
    pointwise = {"dims": {**x, "mb": tokens, "out": inter}, "work_division": division}
    shapes = {"x": [tokens, hidden], "wg": [hidden, inter], "wu": [hidden, inter], "wd": [inter, hidden]}
    tensors = {**{name: tensor([*lead, *shape], "input") for name, shape in shapes.items()},
               **{name: tensor([*lead, tokens, inter], "intermediate") for name in "guah"},
               "y": tensor([*lead, tokens, hidden], "output")}
    kernels = [matmul("gate", "x", "wg", "g", inter, hidden), matmul("up", "x", "wu", "u", inter, hidden),
               {"name": "silu", "op": "silu", "inputs": ["g"], "outputs": ["a"], **pointwise},
               {"name": "mul", "op": "mul", "inputs": ["a", "u"], "outputs": ["h"], **pointwise},
               matmul("down", "h", "wd", "y", hidden, inter)]
    return {"format": KERNEL_FORMAT, "version": 1, "note": note, "tensors": tensors, "kernels": kernels}
