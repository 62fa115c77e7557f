"""lower(): kernel program -> unit program (the job of IBM's closed backend compiler).

Kernels run in program order: a kernel's first loads on each core wait until every core
of the previous kernel has stored its last stick (a token from each to each).
"""

from __future__ import annotations

from typing import Any

from ..config import Machine
from ..errors import ProgramError
from ..kernel_program import KernelProgram, device_bytes
from ..kernel_program.model import Kernel
from ..kernel_program.ops import OPS
from ..unit_program import UnitProgram, parse_unit_program
from .matmul import plan_matmul
from .pointwise import plan_pointwise
from .reduction import constants, plan_reduction
from .streams import CoreStreams

LX_RESERVED_BYTES = 65536  # torch-spyre keeps 64 KB + 20 % of LX for the runtime (high)
LX_RESERVED_SHARE = 0.2
MAX_SPAN_BYTES = 256 << 20  # a core may address at most 256 MB of one tensor (torch-spyre, high)
# Each op family's planner checks a kernel and returns every core's share of it.
FAMILIES = {"pointwise": plan_pointwise, "matmul": plan_matmul, "reduction": plan_reduction}


def lower(program: KernelProgram, machine: Machine) -> UnitProgram:
    lx_sticks = int((machine.lx.size_bytes - LX_RESERVED_BYTES) * (1 - LX_RESERVED_SHARE)) // 128
    cores: dict[int, CoreStreams] = {}
    previous: list[int] = []
    first: list[int] | None = None
    for kernel in program.kernels:
        before = {c: {u: len(items) for u, items in s.units.items()} for c, s in cores.items()}
        used = _lower_kernel(program, kernel, machine, cores, lx_sticks)
        _tag(cores, before, kernel.name)
        _barrier(cores, kernel.name, before, previous, used)
        _check_spans(cores, before, kernel, program.source)
        first = used if first is None else first
        previous = used
    buffers = {name: _buffer(t) for name, t in program.tensors.items()} | constants(program)
    data: dict[str, Any] = {"format": "spyre-emu.unit-program", "version": 1, "buffers": buffers,
                            "cores": [{"core": c, "units": s.units} for c, s in sorted(cores.items())]}
    if program.host_transfers and program.kernels:
        data["host"] = _host_transfers(program, cores, first or [], previous)
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


def _tag(cores: dict[int, CoreStreams], before: dict[int, dict[str, int]], name: str) -> None:
    """Mark every instruction the kernel added with its name, for per-kernel reports."""
    for c, streams in cores.items():
        for unit, items in streams.units.items():
            for item in items[before.get(c, {}).get(unit, 0):]:
                item["kernel"] = name


def _check_spans(cores: dict[int, CoreStreams], before: dict[int, dict[str, int]], kernel: Kernel,
                 source: str) -> None:
    """No core may span more than 256 MB of one tensor within a kernel."""
    for c, streams in cores.items():
        spans: dict[str, list[int]] = {}
        for unit in ("load", "store"):
            for item in streams.units.get(unit, [])[before.get(c, {}).get(unit, 0):]:
                name, _, offset = item["dram"].partition("+")
                lo_hi = spans.setdefault(name, [int(offset), 0])
                lo_hi[0] = min(lo_hi[0], int(offset))
                lo_hi[1] = max(lo_hi[1], int(offset) + item["bytes"])
        for name, (lo, hi) in spans.items():
            if hi - lo > MAX_SPAN_BYTES:
                raise ProgramError(f"core {c} would span {hi - lo} B of tensor {name!r}; at most "
                                   f"{MAX_SPAN_BYTES} B per core: split the work over more cores", source,
                                   kernel.path + ".work_division")


def _host_transfers(program: KernelProgram, cores: dict[int, CoreStreams], first: list[int],
                    last: list[int]) -> list[dict[str, Any]]:
    """PCIe copies: inputs in before every core's first load, outputs out after every core's last store."""
    ins = [t for t in program.tensors.values() if t.role in ("input", "constant")]
    outs = [t for t in program.tensors.values() if t.role == "output"]
    host = [{"op": "h2d", "dram": t.name, "bytes": device_bytes(t.layout)} for t in ins]
    if host:
        host[-1]["signal"] = [f"h2d.to{c}" for c in first]
        for c in first:
            cores[c].units["load"][0].setdefault("wait", []).append(f"h2d.to{c}")
    d2h = [{"op": "d2h", "dram": t.name, "bytes": device_bytes(t.layout)} for t in outs]
    if d2h:
        d2h[0]["wait"] = [f"d2h.from{c}" for c in last]
        for c in last:
            cores[c].units["store"][-1].setdefault("signal", []).append(f"d2h.from{c}")
    return host + d2h


def _barrier(cores: dict[int, CoreStreams], name: str, before: dict[int, dict[str, int]], previous: list[int],
             used: list[int]) -> None:
    """Hold each core's first load of kernel ``name`` until every core of the previous kernel stored."""
    for p in previous:
        last_store = cores[p].units["store"][before[p]["store"] - 1]
        last_store.setdefault("signal", []).extend(f"{name}.from{p}.to{c}" for c in used)
    for c in used:
        first_load = cores[c].units["load"][before.get(c, {}).get("load", 0)]
        first_load.setdefault("wait", []).extend(f"{name}.from{p}.to{c}" for p in previous)
