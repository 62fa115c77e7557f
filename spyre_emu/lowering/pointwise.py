"""Pointwise kernels: every core streams its output sticks through its SFUs, chunk by chunk.

An op is a list of SFU steps over the kernel's inputs (most ops are one step); a kernel may have
several such lists, one per output stick (a cast widens the low or the high half of a stick). Inputs broadcast
over their size-1 dims and, outside the stick dim, over a dim of n positions where the output has m (n divides
m): output index h reads index h // (m / n) (a size-1 dim reads 0), so a (B, 1, L) mask broadcasts over scores
whose batch and heads are one merged dim, each batch's heads consecutive. Each output stick reads, from each
input, the stick holding its host index so divided; an input broadcast along the stick dim is read with lane 0
splatted to every lane (``*_splat``: the LX load unit splats as it reads, no extra pass; SuperDSC
gives such an operand stride 0 over the lanes, docs/decisions/sfu.md). DRAM inputs are loaded per
chunk (only the distinct sticks it needs), LX inputs are read in place and an LX output is written
in place. Two buffer sets alternate (double buffering: chunk q + 2 reuses chunk q's set) and the
two corelets' SFUs each take half. A broadcast input that several cores read alike, chunk by chunk (an
[R, 1] operand when the cores split the stick columns, a mask over heads), is loaded by the first of each
cohort of up to ``dma.multicast_max_cores`` with one multicast into every member's LX, as matmul
operands are (``cohorts.cohorts_of``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import Tensor, dim_map
from ..kernel_program.layout import NO_HOST_DIM
from ..kernel_program.model import Kernel
from ..kernel_program.ops import OPS, Step
from .cohorts import cohorts_of
from .lx import Resident
from .placement import Runs, as_runs, check_division, core_runs, division, run_ids, stick_hosts, stick_of
from .sfu import sfu_ops, stick_addrs
from .streams import CoreStreams, Emit, chunks, halves
from .target import Stepper, Target


@dataclass(frozen=True)
class Operand:
    """One input as one core reads it: its stick for each of the core's output sticks."""

    name: str
    ids: np.ndarray
    splat: bool                  # broadcast along the stick dim
    resident: Resident | None    # kept in LX, else in DRAM
    full: bool                   # the output's own sticks (loads follow the output's runs)
    cohort: tuple[int, ...] = ()  # the cores one multicast feeds this operand, the loading one first; () alone


def lower_pointwise(core: CoreStreams, *, steps: tuple[tuple[Step, ...], ...], inputs: list[Operand], output: str,
                    runs: Runs, out_home: Resident | None, budget: int, step: Stepper, dtype: str,
                    where: tuple[str, str], variant: np.ndarray | None = None, out_dtype: str | None = None,
                    kernel: str = "") -> None:
    """Append one core's share of a pointwise kernel to its unit streams: output stick ``p`` takes
    the steps ``steps[variant[p]]`` (all ``steps[0]`` without ``variant``) over operands of ``dtype``,
    written as ``out_dtype`` when a cast changes it."""
    out_ids = run_ids(runs)
    variant = np.zeros(len(out_ids), np.int64) if variant is None else variant
    chunk = step(len(out_ids), budget // (2 * (len(inputs) + 1)))
    pos, users = 0, {}
    for q, piece in enumerate(chunks(runs, chunk)):
        n = sum(count for _, count in piece)
        bufs = [(2 * i + q % 2) * chunk * STICK_BYTES for i in range(len(inputs) + 1)]
        loads: list[dict] = []
        shared: dict[int, list[dict]] = {}
        addrs = [_operand(core, op, op.ids[pos:pos + n], buf, piece, shared.setdefault(i, []) if op.cohort else loads,
                          where) for i, (op, buf) in enumerate(zip(inputs, bufs, strict=False))]
        splat = {i for i, op in enumerate(inputs) if op.splat}
        out = out_home.addr(core.core, out_ids[pos:pos + n], *where) if out_home else stick_addrs(bufs[-1], n)
        work = {unit: _half_ops(steps, variant[pos:pos + n], addrs, splat, out, lo, hi, (dtype, out_dtype))
                for unit, (lo, hi) in halves(n).items()}
        users[q] = sorted(work)
        for i, items in shared.items():
            _multicast(core, kernel, q, i, inputs[i].cohort, items, work, users)
        stores = [] if out_home else core.dma("store", output, piece, bufs[-1])
        core.wire_chunk(q, loads, work, stores)
        pos += n


def _multicast(core: CoreStreams, kernel: str, q: int, i: int, cohort: tuple[int, ...], loads: list[dict],
               work: dict[str, list[dict]], users: dict[int, list[str]]) -> None:
    """Chunk ``q``'s loads of shared input ``i``: the cohort's first core loads them into every member's LX
    (the same buffer on each, their chunks alike) once each member's SFUs are done with chunk q - 2 there,
    and tells them the data is in; the others load nothing and wait for it."""
    def token(chunk: int, way: str, member: int, unit: str) -> str:
        return f"{kernel}.q{chunk}.in{i}.c{cohort[0]}{way}c{member}.{unit}"
    if core.core == cohort[0]:
        for item in loads:
            item["to"] = list(cohort)
        loads[-1].setdefault("signal", []).extend(token(q, ">", m, u) for m in cohort for u in users[q])
        if q >= 2:
            loads[0].setdefault("wait", []).extend(token(q - 2, "<", m, u) for m in cohort for u in users[q - 2])
    for unit, ops in work.items():
        ops[0].setdefault("wait", []).append(token(q, ">", core.core, unit))
        ops[-1].setdefault("signal", []).append(token(q, "<", core.core, unit))


def _operand(core: CoreStreams, op: Operand, ids: np.ndarray, buf: int, piece: Runs, loads: list[dict],
             where: tuple[str, str]) -> np.ndarray:
    """The operand's address for each chunk position, loading what it needs into ``buf``."""
    if op.full and op.resident is None:
        loads += core.dma("load", op.name, piece, buf)
        return stick_addrs(buf, len(ids))
    distinct, slot = np.unique(ids, return_inverse=True)  # ascending: runs load in device order
    if op.resident is None:
        if not op.cohort or core.core == op.cohort[0]:  # a cohort's other members get its first core's multicast
            loads += core.dma("load", op.name, as_runs(distinct), buf)
        return stick_addrs(buf, len(distinct))[slot]
    return op.resident.addr(core.core, distinct, *where)[slot]


def _half_ops(steps: tuple[tuple[Step, ...], ...], variant: np.ndarray, addrs: list[np.ndarray], splat: set[int],
              out: np.ndarray, lo: int, hi: int, dtypes: tuple[str, str | None]) -> list[dict]:
    """One corelet's SFU ops for chunk positions [lo, hi), stretch by stretch of positions taking the
    same steps; the inputs in ``splat`` are read splatted."""
    ops = []
    cuts = [lo, *(lo + 1 + np.flatnonzero(np.diff(variant[lo:hi]))).tolist(), hi]
    for s, e in zip(cuts, cuts[1:], strict=False):
        for sfu_op, args in steps[variant[s]] if e > s else ():
            operands = [(out if a == "t" else addrs[a])[s:e] for a in args]
            ops += sfu_ops(sfu_op, operands, out[s:e], *dtypes,
                           splat=tuple(k for k, a in enumerate(args) if a != "t" and a in splat))
    return ops


def plan_pointwise(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a pointwise kernel and return each core's share of it."""
    src, out = target.program.source, tensors[-1].layout
    if list(kernel.dims.values()) != list(out.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the output shape {list(out.shape)}",
                           src, kernel.path + ".dims")
    for j, t in enumerate(tensors[:-1]):
        _check_broadcast(t, tensors[-1], src, f"{kernel.path}.inputs[{j}]")
    div = division(kernel)
    check_division(out, div, src, kernel.path + ".work_division")
    spec, host = OPS[kernel.op], stick_hosts(out)[0]
    steps = ((spec.sfu, tuple(range(spec.arity))),) if isinstance(spec.sfu, str) else spec.sfu
    stick_dim = dim_map(out)[-1]
    homes = [target.residents.get(t.name) for t in tensors]
    moves = spec.sfu == "copy" and tensors[0].layout == out and (homes[0] is None) != (homes[1] is None)
    shares, operands = {}, {}
    for core, runs in core_runs(out, div).items():
        ids = run_ids(runs)
        lx = (homes[0] or homes[1]).addr(core, ids, src, kernel.path) if moves else None
        if lx is not None and (np.diff(lx) == STICK_BYTES).all():
            shares[core] = partial(lower_dma_copy, names=(tensors[0].name, tensors[1].name), runs=runs,
                                   lx=int(lx[0]), load=homes[1] is not None)
            continue
        inputs = []
        for t in tensors[:-1]:
            size = np.array(t.layout.shape)
            mine = stick_of(t.layout, host[:, ids] // (np.array(out.shape) // size)[:, None])
            splat = stick_dim != NO_HOST_DIM and size[stick_dim] < out.shape[stick_dim]
            inputs.append(Operand(t.name, mine, bool(splat),
                                  target.residents.get(t.name), t.layout == out))
        operands[core] = (runs, inputs)
    for core, (runs, inputs) in _shared(operands, target.machine.dma.multicast_max_cores).items():
        shares[core] = partial(lower_pointwise, steps=(steps,), inputs=inputs, output=tensors[-1].name, runs=runs,
                               out_home=target.residents.get(tensors[-1].name), budget=target.budget,
                               step=target.streaming_stepper(kernel, tensors),
                               dtype=out.dtype, where=(src, kernel.path), kernel=kernel.name)
    return dict(sorted(shares.items()))


def _shared(operands: dict[int, tuple[Runs, list[Operand]]], limit: int) -> dict[int, tuple[Runs, list[Operand]]]:
    """Each core's inputs with the cohorts that share a broadcast one: cores reading the same sticks of a DRAM
    input for output shares of the same size (so chunk by chunk the same sticks into the same LX buffer), up to
    ``limit`` of them in core order, take it from one multicast instead of a load each (an [R, 1] operand
    broadcast along the stick dim, read by every core that takes some of each row's columns)."""
    out = {core: (runs, list(inputs)) for core, (runs, inputs) in operands.items()}
    for i in range(max((len(inputs) for _, inputs in operands.values()), default=0)):
        keys = {core: (len(inputs[i].ids), inputs[i].ids.tobytes()) for core, (_, inputs) in operands.items()
                if not inputs[i].full and inputs[i].resident is None}
        for core, cohort in cohorts_of(keys, limit).items():
            if len(cohort) > 1:
                out[core][1][i] = replace(out[core][1][i], cohort=cohort)
    return out


def lower_dma_copy(core: CoreStreams, *, names: tuple[str, str], runs: Runs, lx: int, load: bool) -> None:
    """A copy between DRAM and an LX tensor of the same layout is one DMA transfer, no SFU pass: the
    load and store units move DRAM <-> LX themselves (the clone that stages an input in LX, a tile
    copied in or out; docs/decisions/sfu.md)."""
    if load:
        core.dma("load", names[0], runs, lx)
    else:
        core.dma("store", names[1], runs, lx)


def _check_broadcast(t: Tensor, out: Tensor, src: str, where: str) -> None:
    a, o = t.layout, out.layout
    stick = dim_map(o)[-1]
    ok = (a.dtype == o.dtype and len(a.shape) == len(o.shape)
          and all(n in (1, m) or (d != stick and m % n == 0)
                  for d, (n, m) in enumerate(zip(a.shape, o.shape, strict=True)))
          and dim_map(a)[-1] in (stick, NO_HOST_DIM))  # one element per stick: splatted
    if not ok:
        raise ProgramError(f"input {t.name!r} ({list(a.shape)} {a.dtype}) does not broadcast to the output "
                           f"({list(o.shape)} {o.dtype}): same rank and dtype, each dim equal, 1 or (outside the "
                           "stick dim) a divisor of the output's, and the same stick dim (else restickify it first)",
                           src, where)
