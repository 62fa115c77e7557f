"""lower(): kernel program -> unit program (the job of IBM's closed backend compiler).

Kernels run in program order: a kernel's first loads on each core wait until every core
of the previous kernel has stored its last stick (a token from each to each).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ..config import Machine
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor, default_layout, device_bytes, elems_per_stick
from ..kernel_program.model import Kernel
from ..kernel_program.ops import OPS
from ..unit_program import UnitProgram, parse_unit_program
from .matmul import Operands, lower_matmul, tile_chunk
from .placement import as_runs, check_division, core_runs, owner_of, stick_hosts, stick_of
from .pointwise import lower_pointwise
from .reduction import lower_reduction
from .streams import CoreStreams

Emit = Callable[[CoreStreams], None]  # appends one core's share of a kernel to its streams
LX_RESERVED_BYTES = 65536  # torch-spyre keeps 64 KB + 20 % of LX for the runtime (high)
LX_RESERVED_SHARE = 0.2


def lower(program: KernelProgram, machine: Machine) -> UnitProgram:
    lx_sticks = int((machine.lx.size_bytes - LX_RESERVED_BYTES) * (1 - LX_RESERVED_SHARE)) // 128
    cores: dict[int, CoreStreams] = {}
    previous: list[int] = []
    for kernel in program.kernels:
        before = {c: {u: len(items) for u, items in s.units.items()} for c, s in cores.items()}
        used = _lower_kernel(program, kernel, machine, cores, lx_sticks)
        _barrier(cores, kernel.name, before, previous, used)
        previous = used
    buffers = {name: _buffer(t) for name, t in program.tensors.items()}
    for kernel in program.kernels:  # constants the lowering needs: 1/n for mean
        if kernel.op == "mean":
            n = program.tensors[kernel.inputs[0]].layout.shape[-1]
            buffers[f"{kernel.name}_scale"] = {"bytes": 128, "dtype": program.tensors[kernel.inputs[0]].layout.dtype,
                                               "fill": 1.0 / n}
    data: dict[str, Any] = {"format": "spyre-emu.unit-program", "version": 1, "buffers": buffers,
                            "cores": [{"core": c, "units": s.units} for c, s in sorted(cores.items())]}
    return parse_unit_program(data, machine, program.source)


def _buffer(tensor) -> dict[str, Any]:
    return {"bytes": device_bytes(tensor.layout), "dtype": tensor.layout.dtype}


def _lower_kernel(program: KernelProgram, kernel: Kernel, machine: Machine, cores: dict[int, CoreStreams],
                  lx_sticks: int) -> list[int]:
    spec, src = OPS[kernel.op], program.source
    if spec.family not in FAMILIES:
        raise ProgramError(f"op {kernel.op!r} ({spec.family}) has no lowering yet", src, kernel.path + ".op")
    tensors = [program.tensors[n] for n in (*kernel.inputs, *kernel.outputs)]
    if any(t.space != "dram" for t in tensors):
        raise ProgramError("tensors in LX are not lowered yet; use space \"dram\"", src, kernel.path)
    if kernel.cores > machine.cores.count:
        raise ProgramError(f"work division needs {kernel.cores} cores; the card has {machine.cores.count}", src,
                           kernel.path + ".work_division")
    shares = FAMILIES[spec.family](program, kernel, tensors, machine, lx_sticks)
    for core, emit in shares.items():
        streams = cores.setdefault(core, CoreStreams(core, ""))
        streams.tag = f"{kernel.name}.c{core}."
        emit(streams)
    return sorted(shares)


def _pointwise_kernel(program: KernelProgram, kernel: Kernel, tensors: list[Tensor], machine: Machine,
                      lx_sticks: int) -> dict[int, Emit]:
    src, out = program.source, tensors[-1]
    if any(t.layout != out.layout for t in tensors):
        raise ProgramError("pointwise operands must share shape, dtype and layout (broadcasting is not "
                           "lowered yet)", src, kernel.path + ".inputs")
    if list(kernel.dims.values()) != list(out.layout.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the output shape "
                           f"{list(out.layout.shape)}", src, kernel.path + ".dims")
    slices = list(kernel.slices.values())
    check_division(out.layout, slices, src, kernel.path + ".work_division")
    sfu_op = OPS[kernel.op].sfu_op
    return {core: partial(lower_pointwise, sfu_op=sfu_op, inputs=list(kernel.inputs), output=kernel.outputs[0],
                          runs=runs, lx_sticks=lx_sticks)
            for core, runs in core_runs(out.layout, slices).items()}


def _matmul_kernel(program: KernelProgram, kernel: Kernel, tensors: list[Tensor], machine: Machine,
                   lx_sticks: int) -> dict[int, Emit]:
    src, where = program.source, kernel.path
    a, b, c = (t.layout for t in tensors)
    batched = len(a.shape) == 3
    if not all(len(t.shape) == len(a.shape) in (2, 3) and t.dtype in ("fp16", "bf16")
               and t == default_layout(t.shape, t.dtype) for t in (a, b, c)):
        raise ProgramError("matmul lowers 2-D or batched 3-D fp16/bf16 operands in the default layout so far",
                           src, where)
    (m, k), n = a.shape[-2:], b.shape[-1]
    want = {"mb": m, "in": k, "out": n, **({"x": a.shape[0]} if batched else {})}
    lead = a.shape[:-2]
    if b.shape != (*lead, k, n) or c.shape != (*lead, m, n) or kernel.dims != want:
        raise ProgramError(f"expected A ([X,] M, K) @ B ([X,] K, N) -> C ([X,] M, N) with dims [x=X,] mb=M, in=K, "
                           f"out=N; got A {list(a.shape)}, B {list(b.shape)}, C {list(c.shape)}, dims {kernel.dims}",
                           src, where + ".dims")
    if kernel.slices["in"] != 1:
        raise ProgramError("splitting the reduced dim 'in' over cores is not lowered yet", src,
                           where + ".work_division.in")
    check_division(c, [kernel.slices[d] for d in (["x"] if batched else []) + ["mb", "out"]], src,
                   where + ".work_division")
    rows, groups = m // kernel.slices["mb"], -(-n // 64) // kernel.slices["out"]
    block = _column_block(-(-k // 64), rows, groups, lx_sticks)
    if block == 0:
        raise ProgramError(f"a core's {rows} rows of C leave no LX for A and B; split mb over more cores", src,
                           where + ".work_division")
    names = (kernel.inputs[0], kernel.inputs[1], kernel.outputs[0])
    per_x = a.shape[0] // kernel.slices["x"] if batched else 1
    shares = {}
    for core in range(kernel.cores):
        index = _slice_index(kernel, core)
        batches = [index["x"] * per_x + i for i in range(per_x)] if batched else [None]
        shares[core] = partial(lower_matmul, operands=[Operands(names, (a, b, c), x) for x in batches], k=k,
                               m_block=(index["mb"] * rows, rows), n_groups=(index["out"] * groups, groups),
                               block=block, lx_sticks=lx_sticks, rows_per_pass=machine.pt.rows_per_pass)
    return shares


def _column_block(k_sticks: int, rows: int, groups: int, lx_sticks: int) -> int:
    """Column groups a core computes at a time: all of them if a K chunk of 8 sticks still fits."""
    fits = [g for g in range(1, groups + 1) if tile_chunk(k_sticks, rows, g, lx_sticks) >= min(8, k_sticks)]
    return fits[-1] if fits else 0


def _reduction_kernel(program: KernelProgram, kernel: Kernel, tensors: list[Tensor], machine: Machine,
                      lx_sticks: int) -> dict[int, Emit]:
    src, where = program.source, kernel.path
    x, y = (t.layout for t in tensors)
    if x != default_layout(x.shape, x.dtype) or y != default_layout(y.shape, y.dtype) or x.dtype != y.dtype \
            or y.shape != (*x.shape[:-1], 1):
        raise ProgramError("reductions lower over the last dim (keepdim) in default layouts so far: output shape "
                           f"{list(y.shape)} for input {list(x.shape)}", src, where + ".outputs")
    if list(kernel.dims.values()) != list(x.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the input shape {list(x.shape)}", src,
                           where + ".dims")
    slices = list(kernel.slices.values())
    if slices[-1] != 1:
        raise ProgramError("splitting the reduced dim over cores is not lowered yet", src, where + ".work_division")
    if kernel.op in ("max", "min") and x.shape[-1] % elems_per_stick(x.dtype):
        raise ProgramError(f"{kernel.op} over a padded stick is not lowered yet", src, where + ".op")
    check_division(x, slices, src, where + ".work_division")
    host, valid = stick_hosts(y)
    owner = owner_of(y, host, slices)
    k_sticks = -(-x.shape[-1] // elems_per_stick(x.dtype))
    scale = f"{kernel.name}_scale" if kernel.op == "mean" else None
    shares = {}
    for core in range(kernel.cores):
        ids = np.flatnonzero(valid & (owner == core))
        if not ids.size:
            continue
        rows = host[:, ids].copy()
        x_sticks = []
        for s in range(k_sticks):
            rows[-1] = s * elems_per_stick(x.dtype)
            x_sticks.append(as_runs(stick_of(x, rows)))
        shares[core] = partial(lower_reduction, op=kernel.op, x=kernel.inputs[0], y=kernel.outputs[0],
                               x_sticks=x_sticks, y_runs=as_runs(ids), scale=scale and f"{scale}+0",
                               lx_sticks=lx_sticks)
    return shares


def _slice_index(kernel: Kernel, core: int) -> dict[str, int]:
    """The slice of each dim that ``core`` owns: the first dim varies fastest."""
    index = {}
    for dim, count in kernel.slices.items():
        core, index[dim] = divmod(core, count)
    return index


def _barrier(cores: dict[int, CoreStreams], name: str, before: dict[int, dict[str, int]], previous: list[int],
             used: list[int]) -> None:
    """Hold each core's first load of kernel ``name`` until every core of the previous kernel stored."""
    for p in previous:
        last_store = cores[p].units["store"][before[p]["store"] - 1]
        last_store.setdefault("signal", []).extend(f"{name}.from{p}.to{c}" for c in used)
    for c in used:
        first_load = cores[c].units["load"][before.get(c, {}).get("load", 0)]
        first_load.setdefault("wait", []).extend(f"{name}.from{p}.to{c}" for p in previous)


FAMILIES = {"pointwise": _pointwise_kernel, "matmul": _matmul_kernel, "reduction": _reduction_kernel}
