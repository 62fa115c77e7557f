"""Tensors kept in LX: where each one lives on each core, and the LX left for chunk buffers.

A tensor with ``space: "lx"`` never touches DRAM. Every core holds the sticks its slice of the
writing kernel owns, in that kernel's order, from one base offset (the same on every core)
allocated from the top of the usable LX down, for the tensor's lifetime (its first to its last
kernel). A kernel's chunk buffers use LX from 0 up to the lowest base live during the kernel.

A tensor ``in_place_of`` another takes over its place: the kernel that writes it reads the other last, and
reads each of its sticks before writing the same stick of the output (a row-wise kernel's x, whose row
statistics are folded before the row is written; a pointwise input that only its first SFU step reads), so
one region holds both (torch-spyre's softmax runs its exp in place so). Anything else is refused, naming the
tensors; so is a kernel writing an LX tensor it reads (one name) that does not read it so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..config import STICK_BYTES
from ..errors import LxOverflowError, ProgramError
from ..kernel_program import KernelProgram
from ..kernel_program.ops import OPS
from .placement import Division, core_runs, run_ids

MIN_CHUNK_STICKS = 64  # what a kernel needs below the resident tensors for its own buffers


@dataclass(frozen=True)
class Resident:
    """An LX tensor: its base offset and, per core, the device stick ids it holds there, ascending
    (a core's local order)."""

    name: str
    base: int
    sticks: dict[int, np.ndarray]

    def addr(self, core: int, ids: np.ndarray, source: str, path: str) -> np.ndarray:
        """LX byte offsets of device sticks ``ids`` on ``core``; an error if the core lacks one."""
        mine = self.sticks.get(core, np.empty(0, np.int64))  # ascending device order
        pos = np.minimum(np.searchsorted(mine, ids), max(mine.size - 1, 0))
        if not mine.size or (mine[pos] != ids).any():
            raise ProgramError(f"LX tensor {self.name!r}: core {core} does not hold the sticks this kernel needs "
                               "(kernels touching an LX tensor must give each core the same slice)", source, path)
        return self.base + pos * STICK_BYTES


@dataclass(frozen=True)
class LxPlan:
    residents: dict[str, Resident]
    budgets: list[int]  # per kernel: LX sticks from 0 free for its chunk buffers


def plan_lx(program: KernelProgram, usable_sticks: int) -> LxPlan:
    """Place every LX tensor at the top of LX for its lifetime; the rest is each kernel's budget."""
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, kernel in enumerate(program.kernels):
        for name in (*kernel.inputs, *kernel.outputs):
            if program.tensors[name].space == "lx":
                first.setdefault(name, i)
                last[name] = i
    residents: dict[str, Resident] = {}
    live: list[tuple[int, int, str]] = []  # (base, end in sticks, name)
    budgets = []
    for i, kernel in enumerate(program.kernels):
        live = [span for span in live if last[span[2]] >= i]
        for name in kernel.outputs:
            _check_rewrite(program, i, name)
            if first.get(name) != i:
                continue
            sticks = _owned(program, i, name)
            over = program.tensors[name].in_place_of
            if over is None:
                size = max((len(ids) for ids in sticks.values()), default=0)
                base = _place(program, name, size, live, usable_sticks, kernel.path)
                live.append((base, base + size, name))
            else:
                base = _over(program, i, name, sticks, residents.get(over), last)
                live = [(b, e, name if n == over else n) for b, e, n in live]
            residents[name] = Resident(name, base * STICK_BYTES, sticks)
        budgets.append(min((b for b, _, _ in live), default=usable_sticks))
    return LxPlan(residents, budgets)


def _place(program: KernelProgram, name: str, size: int, live: list[tuple[int, int, str]], usable: int,
           path: str) -> int:
    """The base (in sticks) of a tensor of ``size`` sticks per core: its ``lx_offset``, else just below
    the live tensors. The kernels' chunk buffers keep at least MIN_CHUNK_STICKS below every base."""
    pinned = program.tensors[name].lx_offset
    lowest = min((b for b, _, _ in live), default=usable)
    base = pinned // STICK_BYTES if pinned is not None else lowest - size
    where = "at its lx_offset" if pinned is not None else "below the live LX tensors"
    if base < MIN_CHUNK_STICKS or base + size > usable:
        raise LxOverflowError(f"LX overflow: tensor {name!r} needs {size * STICK_BYTES} B per core {where}, between "
                              f"{MIN_CHUNK_STICKS * STICK_BYTES} B kept for the kernels' buffers and the "
                              f"{usable * STICK_BYTES} B usable", program.source, path + ".outputs")
    clash = [other for b, e, other in live if b < base + size and base < e]
    if clash:
        raise ProgramError(f"LX tensor {name!r} at its lx_offset overlaps {clash[0]!r}, which is still live",
                           program.source, path + ".outputs")
    return base


def _over(program: KernelProgram, index: int, name: str, sticks: dict[int, np.ndarray], res: Resident | None,
          last: dict[str, int]) -> int:
    """The base (in sticks) of the tensor ``name`` is written over (``in_place_of``), after checking that kernel
    ``index`` may write it there."""
    kernel, tensor = program.kernels[index], program.tensors[name]
    over, path = tensor.in_place_of, kernel.path + ".outputs"

    def refuse(why: str) -> ProgramError:
        return ProgramError(f"LX tensor {name!r} in place of {over!r}: {why}", program.source, path)

    if res is None or over not in kernel.inputs:
        raise refuse(f"{kernel.name!r} must read {over!r}, an LX tensor written before it")
    if not reads_before_writing(kernel.op, kernel.inputs, over):
        raise refuse(f"{kernel.op} does not read every stick of {over!r} before writing the same stick")
    if last[over] != index:
        raise refuse(f"{program.kernels[last[over]].name!r} still reads {over!r} after {kernel.name!r}")
    if tensor.lx_offset is not None or program.tensors[over].layout != tensor.layout:
        raise refuse("it must have the same layout and no lx_offset")
    if sticks.keys() != res.sticks.keys() or any(not np.array_equal(ids, res.sticks[c]) for c, ids in sticks.items()):
        raise refuse(f"{kernel.name!r} gives the cores other slices than {over!r} has")
    return res.base // STICK_BYTES


def _check_rewrite(program: KernelProgram, index: int, name: str) -> None:
    """A kernel writing an LX tensor it also reads (one name for both) writes each stick over itself: it must read
    it as a tensor ``in_place_of`` another is read (``reads_before_writing``), else it would read what it wrote."""
    kernel = program.kernels[index]
    if (name in kernel.inputs and program.tensors[name].space == "lx"
            and not reads_before_writing(kernel.op, kernel.inputs, name)):
        raise ProgramError(f"{kernel.name!r} writes LX tensor {name!r} over itself: {kernel.op} does not read every "
                           f"stick of {name!r} before writing the same stick", program.source, kernel.path + ".outputs")


def reads_before_writing(op: str, inputs: tuple[str, ...], name: str) -> bool:
    """Whether a kernel of ``op`` over ``inputs`` reads each stick of input ``name`` only before or while it writes
    that stick of its output: a row-wise kernel's x (input 0), or a pointwise input only its first SFU step reads."""
    spec, at = OPS[op], {j for j, n in enumerate(inputs) if n == name}
    if spec.family == "rowwise":
        return at == {0}
    return spec.family == "pointwise" and (isinstance(spec.sfu, str) or not any(at & set(args) for _, args in
                                                                                 spec.sfu[1:]))


def _owned(program: KernelProgram, index: int, name: str) -> dict[int, np.ndarray]:
    """The sticks of output ``name`` each core of kernel ``index`` writes, in its order."""
    kernel, layout = program.kernels[index], program.tensors[name].layout
    slices = list(kernel.slices.values())
    if kernel.op == "batchmatmul":  # C's dims are [x,] mb, out; a K split leaves no core the whole of its sticks
        if kernel.slices.get("in", 1) > 1:
            raise ProgramError(f"matmul C {name!r} in LX: K is split over cores (a split-K C is not kept in LX)",
                               program.source, kernel.path + ".work_division.in")
        slices = [kernel.slices[d] for d in kernel.dims if d != "in"]
    if len(slices) != len(layout.shape) or any(n > 1 and m == 1 for n, m in zip(slices, layout.shape, strict=True)):
        raise ProgramError(f"an LX output must be divided over its own dims; kernel {kernel.name!r} has dims "
                           f"{list(kernel.dims)} for {name!r} of shape {list(layout.shape)}", program.source,
                           kernel.path + ".outputs")
    return {c: run_ids(runs) for c, runs in core_runs(layout, Division(tuple(slices), kernel.uneven)).items()}
