"""lower(): kernel program -> unit program (the job of IBM's closed backend compiler).

Kernels run in program order. On each core, a kernel's first instruction on every unit waits
for the previous kernel's last instruction on every other unit of that core (LX is reused, and
LX-resident tensors pass from kernel to kernel on one core). Across cores, a kernel's first
load on each core waits for the latest store of every core (DRAM tensors pass between cores;
a core's stores complete in order, so its latest covers all its earlier ones), and, when its loads
multicast into other cores' LX, for the last instruction on every unit of each such core (a kernel
that stores nothing, its output in LX, would otherwise have its LX overwritten while it runs).
"""

from __future__ import annotations

import math
from typing import Any

from ..config import DTYPE_BYTES, STICK_BYTES, Machine
from ..errors import ProgramError
from ..kernel_program import KernelProgram, device_bytes
from ..kernel_program.model import Kernel
from ..kernel_program.ops import OPS
from ..unit_program import UnitProgram, parse_unit_program
from .cast import plan_cast
from .concat import plan_cat
from .gather import plan_embedding
from .lx import plan_lx
from .matmul import plan_matmul
from .patches import pad_constants, plan_patches
from .pointwise import plan_pointwise
from .reduction import constants, plan_reduction
from .restickify import plan_restickify
from .rowwise import constants as row_constants
from .rowwise import plan_rowwise
from .spans import MAX_SPAN_BYTES, check_span, lowered_spans
from .streams import CoreStreams, Item
from .target import Planner, Target

LX_RESERVED_BYTES = 65536  # torch-spyre keeps 64 KB + 20 % of LX for the runtime (high)
LX_RESERVED_SHARE = 0.2
FAMILIES: dict[str, Planner] = {"pointwise": plan_pointwise, "matmul": plan_matmul, "reduction": plan_reduction,
                                "rowwise": plan_rowwise, "restickify": plan_restickify, "cast": plan_cast,
                                "gather": plan_embedding, "patches": plan_patches, "concat": plan_cat}
LX_FAMILIES = {"pointwise", "reduction", "rowwise", "cast", "matmul"}  # families that read and write LX tensors


def lower(program: KernelProgram, machine: Machine) -> UnitProgram:
    _check_card(program, machine)
    lx = plan_lx(program, usable_lx_sticks(machine))
    cores: dict[int, CoreStreams] = {}
    last: dict[int, dict[str, Item]] = {}     # core -> unit -> its last instruction so far
    stored: dict[int, Item] = {}              # core -> its latest store
    first: list[int] | None = None
    for kernel, budget in zip(program.kernels, lx.budgets, strict=True):
        before = {c: {u: len(items) for u, items in s.units.items()} for c, s in cores.items()}
        used = _lower_kernel(Target(program, machine, budget, lx.residents), kernel, cores)
        added = {c: {u: items[before.get(c, {}).get(u, 0):] for u, items in cores[c].units.items()} for c in used}
        added = {c: {u: items for u, items in units.items() if items} for c, units in added.items()}
        _barrier(kernel.name, added, last, stored)
        first = used if first is None else first
    buffers = {name: _buffer(t) for name, t in program.tensors.items() if t.space == "dram"}
    buffers |= constants(program) | row_constants(program) | pad_constants(program)
    data: dict[str, Any] = {"format": "spyre-emu.unit-program", "version": 1, "buffers": buffers,
                            "cores": [{"core": c, "units": s.units} for c, s in sorted(cores.items())]}
    if program.host_transfers and program.kernels:
        data["host"] = _host_transfers(program, cores, first or [], stored)
    return parse_unit_program(data, machine, program.source, schema=False)


def usable_lx_sticks(machine: Machine) -> int:
    """LX sticks per core the kernels may use."""
    return int((machine.lx.size_bytes - LX_RESERVED_BYTES) * (1 - LX_RESERVED_SHARE)) // STICK_BYTES


def _check_card(program: KernelProgram, machine: Machine) -> None:
    """Work divisions and tensors must fit the card before any planning: LX planning walks every core of a
    division and every stick of a tensor, so a huge slice count or shape would otherwise run for hours or
    ask numpy for arrays of absurd size before anything rejected it."""
    for kernel in program.kernels:
        if kernel.cores > machine.cores.count:
            raise ProgramError(f"work division needs {kernel.cores} cores; the card has {machine.cores.count}",
                               program.source, kernel.path + ".work_division")
    total, room = 0, {"dram": machine.dram.size_bytes, "lx": machine.lx.size_bytes * machine.cores.count}
    for name, tensor in program.tensors.items():
        nbytes = device_bytes(tensor.layout)
        total += nbytes if tensor.space == "dram" else 0
        if nbytes > room[tensor.space] or total > room["dram"]:
            where = "device memory" if tensor.space == "dram" else "the LX of all cores"
            raise ProgramError(f"{name} takes {nbytes} B; with the tensors before it, more than the {where} "
                               f"({room[tensor.space]} B)", program.source, f"tensors.{name}.shape")
    for kernel in program.kernels:
        _check_shares(program, kernel)


def _check_shares(program: KernelProgram, kernel: Kernel) -> None:
    """_check_spans from the declared shapes alone: a kernel reads or writes every element of its DRAM tensors,
    so some core's span is at least an even share of each. Lowering a share that large first would build
    per-stick arrays of gigabytes only to refuse them."""
    for name in (*kernel.inputs, *kernel.outputs):
        tensor = program.tensors[name]
        share = -(-math.prod(tensor.layout.shape) * DTYPE_BYTES[tensor.layout.dtype] // kernel.cores)
        if tensor.space == "dram" and share > MAX_SPAN_BYTES:
            raise ProgramError(f"a core would span at least {share} B of tensor {name!r}; at most {MAX_SPAN_BYTES} B "
                               "per core: split the work over more cores", program.source,
                               kernel.path + ".work_division")


def _buffer(tensor) -> dict[str, Any]:
    placed = {} if tensor.dram_address is None else {"addr": tensor.dram_address}
    return {"bytes": device_bytes(tensor.layout), "dtype": tensor.layout.dtype, **placed}


def _lower_kernel(target: Target, kernel: Kernel, cores: dict[int, CoreStreams]) -> list[int]:
    spec, program = OPS[kernel.op], target.program
    src = program.source
    tensors = [program.tensors[n] for n in (*kernel.inputs, *kernel.outputs)]
    if spec.family not in LX_FAMILIES and any(t.space != "dram" for t in tensors):
        raise ProgramError(f"{spec.family} kernels read and write DRAM tensors only so far", src, kernel.path)
    shares = FAMILIES[spec.family](target, kernel, tensors)
    order = iter(sorted(shares))  # spans are checked in core order, each core once every core before it is lowered
    due, added = next(order, None), {}
    for core, emit in shares.items():
        streams = cores.setdefault(core, CoreStreams(core))
        before = {u: len(items) for u, items in streams.units.items()}
        streams.start_kernel(f"{kernel.name}.c{core}.")
        emit(streams)
        added[core] = {u: items[before.get(u, 0):] for u, items in streams.units.items()}
        while due in added:
            _check_spans(due, added.pop(due), kernel, src)
            due = next(order, None)
    return sorted(shares)


def _barrier(name: str, added: dict[int, dict[str, list[Item]]], last: dict[int, dict[str, Item]],
             stored: dict[int, Item]) -> None:
    """Order kernel ``name`` (``added``: its instructions per core and unit) after what ran before,
    tag its instructions with its name, and record its last instructions and stores."""
    for c, units in added.items():
        for unit, items in units.items():
            for item in items:
                item["kernel"] = name
            for before, prev in last.get(c, {}).items():
                if before != unit:
                    _link(prev, items[0], f"{name}.c{c}.{before}>{unit}")
        if "load" in units:
            for p, store in stored.items():
                _link(store, units["load"][0], f"{name}.from{p}.to{c}")
            fed = sorted({d for item in units["load"] for d in item.get("to", ()) if d != c})
            for d in fed:  # a multicast writes other cores' LX: not before their last kernel is done with it
                for unit, prev in last.get(d, {}).items():
                    _link(prev, units["load"][0], f"{name}.c{d}.{unit}>mc{c}")
    for c, units in added.items():
        last.setdefault(c, {}).update({unit: items[-1] for unit, items in units.items()})
        if "store" in units:
            stored[c] = units["store"][-1]


def _link(producer: Item, consumer: Item, token: str) -> None:
    producer.setdefault("signal", []).append(token)
    consumer.setdefault("wait", []).append(token)


def _check_spans(core: int, units: dict[str, list[Item]], kernel: Kernel, source: str) -> None:
    """No core may span more than 256 MB of one tensor within a kernel (spans.py): checked core by core during
    the kernel's lowering, so a refused division stops at the first core over the limit in core order."""
    for name, span in lowered_spans(units).items():
        check_span(core, name, span, source, kernel.path + ".work_division")


def _host_transfers(program: KernelProgram, cores: dict[int, CoreStreams], first: list[int],
                    stored: dict[int, Item]) -> list[dict[str, Any]]:
    """PCIe copies: inputs in before the first kernel's loads, outputs out after every core's last store."""
    ins = [t for t in program.tensors.values() if t.role in ("input", "constant")]
    outs = [t for t in program.tensors.values() if t.role == "output"]
    host = [{"op": "h2d", "dram": t.name, "bytes": device_bytes(t.layout)} for t in ins]
    if host:
        host[-1]["signal"] = [f"h2d.to{c}" for c in first if "load" in cores[c].units]
        for c in first:
            if "load" in cores[c].units:
                cores[c].units["load"][0].setdefault("wait", []).append(f"h2d.to{c}")
    d2h = [{"op": "d2h", "dram": t.name, "bytes": device_bytes(t.layout)} for t in outs]
    if d2h:
        for c, store in stored.items():
            _link(store, d2h[0], f"d2h.from{c}")
    return host + d2h
