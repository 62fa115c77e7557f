"""Row-wise kernels over the stick (last) dim, each row whole on one core: ``softmax``,
``layernorm``, ``rmsnorm`` and ``layernormscale`` (the rstd of a row, as torch-spyre's layer norm
decomposition computes it).

Per chunk of rows, every stick of the rows is in LX at once: the SFUs fold the row's sticks into
one stick (max, sum, sum of squares), reduce it across lanes (the result lands in every lane),
and stream the row through the per-row statistics. The last stick's padding lanes are replaced
by the identity before any statistic (``where`` with a lane mask). Weight and bias are loaded
once per core and broadcast over the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from ..config import STICK_BYTES
from ..errors import ProgramError
from ..kernel_program import KernelProgram, Tensor, default_layout, elems_per_stick
from ..kernel_program.model import Kernel
from .lx import Resident
from .placement import as_runs, check_division, division, owner_of, stick_hosts, stick_of
from .reduction import LOWEST
from .sfu import fold, masked, sfu_ops, stick_addrs
from .streams import CoreStreams, Emit, Item, chunks, halves
from .target import Stepper, Target

SCALE, MASK, ZERO, LOWEST_AT, EPS = (i * STICK_BYTES for i in range(5))  # constant sticks at LX 0
CONSTANTS = 5
PER_ROW_OUT = {"softmax": True, "layernorm": True, "rmsnorm": True, "layernormscale": False}
BATCH_OUTER = (1, 0, 2)  # a 3-D x and y of the per-row ops may both be laid out so: each batch a 2-D layout


@dataclass(frozen=True)
class Rows:
    """One core's rows of a row-wise kernel."""

    kernel: str
    op: str
    x: str
    y: str
    params: tuple[str, ...]        # weight (and bias)
    homes: dict[str, Resident]     # the operands kept in LX
    x_ids: np.ndarray              # [sticks per row, rows]
    y_ids: np.ndarray              # [output sticks per row, rows]
    param_ids: tuple[np.ndarray, ...]  # per weight (and bias), its sticks in row order
    rms: bool
    safe: bool                     # softmax: clamp the row max to the lowest finite value, the sum to 1
    masked: bool
    dtype: str
    where: tuple[str, str]


def lower_rowwise(core: CoreStreams, rows: Rows, budget: int, step: Stepper) -> None:
    k, k_out = rows.x_ids.shape[0], rows.y_ids.shape[0]
    fixed = CONSTANTS + k * len(rows.params)
    room = k + k_out + 4  # x, out, acc, acc2, acc3, pad
    chunk = step(rows.x_ids.shape[1], (budget - fixed) // (2 * room))
    setup = core.dma("load", constants_buffer(rows.kernel), [(0, CONSTANTS)], 0)
    params = []
    for i, name in enumerate(rows.params):
        at = (CONSTANTS + i * k) * STICK_BYTES
        if name in rows.homes:
            params.append(rows.homes[name].addr(core.core, rows.param_ids[i], *rows.where))
        else:
            setup += core.dma("load", name, as_runs(rows.param_ids[i]), at)
            params.append(stick_addrs(at, k))
    n_rows, done = rows.x_ids.shape[1], 0
    for q, piece in enumerate(chunks([(0, n_rows)], chunk)):
        n = piece[0][1]
        region = [(fixed + ((q % 2) * room + i) * chunk) * STICK_BYTES for i in range(room)]
        loads = setup if q == 0 else []
        xs = _sticks(core, rows, rows.x, rows.x_ids[:, done:done + n], region[:k], loads)
        outs = _sticks(core, rows, rows.y, rows.y_ids[:, done:done + n], region[k:k + k_out], None)
        temps = [stick_addrs(r, n) for r in region[k + k_out:]]
        work = {unit: _row_ops(rows, [x[lo:hi] for x in xs], [o[lo:hi] for o in outs],
                               [t[lo:hi] for t in temps], params)
                for unit, (lo, hi) in halves(n).items()}
        stores = [] if rows.y in rows.homes else [
            item for s in range(k_out) for item in core.dma("store", rows.y, as_runs(rows.y_ids[s, done:done + n]),
                                                            region[k + s])]
        core.wire_chunk(q, loads, work, stores)
        done += n


def _sticks(core: CoreStreams, rows: Rows, name: str, ids: np.ndarray, region: list[int],
            loads: list[Item] | None) -> list[np.ndarray]:
    """Per stick of a row, the chunk rows' addresses: in LX where the tensor lives there, else in
    ``region`` (loaded first when ``loads`` collects the loads)."""
    if name in rows.homes:
        return [rows.homes[name].addr(core.core, ids[s], *rows.where) for s in range(len(ids))]
    if loads is not None:
        for s, at in enumerate(region):
            loads += core.dma("load", name, as_runs(ids[s]), at)
    return [stick_addrs(at, ids.shape[1]) for at in region]


def _row_ops(rows: Rows, xs: list[np.ndarray], outs: list[np.ndarray], temps: list[np.ndarray],
             params: list[np.ndarray]) -> list[Item]:
    acc, acc2, acc3, pad = temps
    dt = rows.dtype

    def const(at: int) -> np.ndarray:
        return np.full_like(acc, at)

    def op(name: str, operands: list[np.ndarray], out: np.ndarray) -> list[Item]:
        return sfu_ops(name, operands, out, dt)

    def identity_padded(sticks: list[np.ndarray], fill: int) -> tuple[list[Item], list[np.ndarray]]:
        if not rows.masked:
            return [], sticks
        return masked(sticks[-1], pad, MASK, fill, dt), [*sticks[:-1], pad]

    if rows.op == "softmax":
        ops, stats = identity_padded(xs, LOWEST_AT)
        ops += fold("max", stats, acc, dt) + op("lanes_max", [acc], acc)
        if rows.safe:  # a row of -inf: exp(-inf - lowest) = 0 everywhere, and 0 / 1 = 0
            ops += op("max", [acc, const(LOWEST_AT)], acc)
        for x, o in zip(xs, outs, strict=True):
            ops += op("sub", [x, acc], o) + op("exp", [o], o)
        more, stats = identity_padded(outs, ZERO)
        ops += more + fold("add", stats, acc2, dt) + op("lanes_sum", [acc2], acc2)
        if rows.safe:  # any other row sums to at least exp(0) = 1, so this changes nothing there
            ops += op("max", [acc2, const(EPS)], acc2)
        return ops + [item for o in outs for item in op("div", [o, acc2], o)]
    ops, stats = identity_padded(xs, ZERO)
    if not rows.rms:
        ops += fold("add", stats, acc, dt) + op("lanes_sum", [acc], acc) + op("mul", [acc, const(SCALE)], acc)
    ops += op("mul", [stats[0], stats[0]], acc2)
    for x in stats[1:]:
        ops += op("mul", [x, x], acc3) + op("add", [acc2, acc3], acc2)
    ops += op("lanes_sum", [acc2], acc2) + op("mul", [acc2, const(SCALE)], acc2)
    if not rows.rms:
        ops += op("mul", [acc, acc], acc3) + op("sub", [acc2, acc3], acc2)
    if rows.op == "layernormscale":
        return ops + op("add", [acc2, const(EPS)], acc2) + op("rsqrt", [acc2], outs[0])
    ops += op("add", [acc2, const(EPS)], acc2) + op("rsqrt", [acc2], acc2)
    for s, (x, o) in enumerate(zip(xs, outs, strict=True)):
        ops += op("mul", [x, acc2], o) if rows.rms else op("sub", [x, acc], o) + op("mul", [o, acc2], o)
        for p, combine in zip(params, ("mul", "add"), strict=False):
            ops += op(combine, [o, np.full_like(o, p[s])], o)
    return ops


def plan_rowwise(target: Target, kernel: Kernel, tensors: list[Tensor]) -> dict[int, Emit]:
    """Check a row-wise kernel and return each core's share of it."""
    src, where = target.program.source, kernel.path
    x, y = tensors[0].layout, tensors[-1].layout
    params = tensors[1:-1] if kernel.op != "layernormscale" else []
    n, lanes = x.shape[-1], elems_per_stick(x.dtype)
    want_y = x.shape if PER_ROW_OUT[kernel.op] else (*x.shape[:-1], 1)
    outer = len(x.shape) == 3 and PER_ROW_OUT[kernel.op] and x == default_layout(x.shape, x.dtype, BATCH_OUTER)
    order = BATCH_OUTER if outer else None
    laid_out = x == default_layout(x.shape, x.dtype, order) and y == default_layout(y.shape, x.dtype, order)
    per_column = all(t.layout == default_layout(t.layout.shape, x.dtype) and t.layout.shape[-1] == n
                     and set(t.layout.shape[:-1]) <= {1} for t in params)
    ok = y.shape == want_y and laid_out and per_column
    if not ok:
        raise ProgramError(f"{kernel.op} takes x ([..., N]) and per-column weight/bias ([N]), all {x.dtype} in the "
                           f"default layout (a 3-D x and y may both be batch-outer, dim_order [1, 0, 2]), and gives "
                           f"{'x.shape' if PER_ROW_OUT[kernel.op] else '[..., 1]'}; got "
                           f"{[list(t.layout.shape) for t in tensors]}", src, where + ".inputs")
    if list(kernel.dims.values()) != list(x.shape):
        raise ProgramError(f"dims {list(kernel.dims.values())} must equal the input shape {list(x.shape)}", src,
                           where + ".dims")
    slices = list(kernel.slices.values())
    if slices[-1] != 1:
        raise ProgramError("row-wise kernels keep each row on one core: the last dim's slices must be 1", src,
                           f"{where}.work_division.{list(kernel.dims)[-1]}")
    check_division(x, division(kernel), src, where + ".work_division")
    row_layout = default_layout((*x.shape[:-1], 1), x.dtype, order)  # a core's rows in the order x holds them
    host, valid = stick_hosts(row_layout)
    owner = owner_of(row_layout, host, division(kernel))
    k = -(-n // lanes)
    param_ids = tuple(_param_sticks(t, k, lanes) for t in params)
    homes = {t.name: target.residents[t.name] for t in tensors if t.name in target.residents}
    shares = {}
    for core in range(kernel.cores):
        ids = np.flatnonzero(valid & (owner == core))
        if not ids.size:
            continue
        at = host[:, ids].copy()
        x_ids = []
        for s in range(k):
            at[-1] = s * lanes
            x_ids.append(stick_of(x, at))
        y_ids = np.array(x_ids) if PER_ROW_OUT[kernel.op] else stick_of(y, host[:, ids])[None, :]
        rows = Rows(kernel.name, kernel.op, tensors[0].name, tensors[-1].name, tuple(t.name for t in params), homes,
                    np.array(x_ids), y_ids, param_ids, kernel.op == "rmsnorm" or bool(kernel.attrs.get("rms")),
                    bool(kernel.attrs.get("safe")), bool(n % lanes), x.dtype, (src, where))
        shares[core] = partial(lower_rowwise, rows=rows, budget=target.budget, step=target.stepper(kernel))
    return shares


def _param_sticks(t: Tensor, k: int, lanes: int) -> np.ndarray:
    """The sticks of a per-column weight or bias, first column first."""
    at = np.zeros((len(t.layout.shape), k), np.int64)
    at[-1] = np.arange(k) * lanes
    return stick_of(t.layout, at)


def constants_buffer(kernel: str) -> str:
    return f"{kernel}_rowconstants"


def constants(program: KernelProgram) -> dict[str, dict[str, Any]]:
    """Per row-wise kernel: sticks of 1/N, the last stick's lane mask, 0, the lowest value, and eps (a norm's;
    a safe softmax's least row sum, 1)."""
    out = {}
    for kernel in program.kernels:
        if kernel.op not in PER_ROW_OUT:
            continue
        x = program.tensors[kernel.inputs[0]].layout
        lanes, n = elems_per_stick(x.dtype), x.shape[-1]
        valid = (n - 1) % lanes + 1
        eps = kernel.attrs.get("eps", 1.0 if kernel.attrs.get("safe") else 0.0)
        values = ([1.0 / n] * lanes + [1.0] * valid + [0.0] * (lanes - valid) + [0.0] * lanes
                  + [LOWEST.get(x.dtype, -127.0)] * lanes + [float(eps)] * lanes)
        out[constants_buffer(kernel.name)] = {"bytes": CONSTANTS * STICK_BYTES, "dtype": x.dtype, "fill": values}
    return out
