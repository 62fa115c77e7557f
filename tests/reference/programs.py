"""Random valid unit programs that always finish: a hypothesis strategy.

A program is drawn as a sequence of steps: one DMA, PT or SFU instruction, or a FIFO group
(the lx2fifo, SFU and fifo2lx instructions of one corelet that stream the same sticks).
Each unit's stream keeps step order, and every token is signalled only by instructions of
earlier steps than the ones that wait on it, as many times as it is waited on. By induction
over the steps every program finishes: a step's instructions come after earlier steps on
their units, their tokens come from earlier steps, and a FIFO group's pushes and pops balance.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from spyre_emu.config import STICK_BYTES, Machine
from spyre_emu.unit_program.opcodes import CAST_SHAPES, SFU_OPERANDS, SFU_OPS

Step = list[tuple[int, str, dict[str, Any]]]  # (core, unit, instruction); core -1 is the host
KB = 1024
LX_OUT = 512 * KB  # where results go in LX; inputs start at 0 (overlaps do not matter to timing)


@st.composite
def unit_programs(draw: st.DrawFn, machine: Machine, max_steps: int = 16) -> dict[str, Any]:
    count = machine.cores.count
    cores = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=min(count, 6), unique=True))
    steps = [draw(_step(machine, cores)) for _ in range(draw(st.integers(1, max_steps)))]
    _add_tokens(draw, steps)
    units: dict[int, dict[str, list]] = {}
    host = []
    for step in steps:
        for core, unit, ins in step:
            (host if core < 0 else units.setdefault(core, {}).setdefault(unit, [])).append(ins)
    data = {"format": "spyre-emu.unit-program", "version": 1,
            "cores": [{"core": c, "units": u} for c, u in sorted(units.items())]}
    if host:
        data["host"] = host
    return data


def _step(machine: Machine, cores: list[int]) -> st.SearchStrategy[Step]:
    core = st.sampled_from(cores)
    corelet = st.integers(0, 1)
    return st.one_of(
        st.builds(_dma, core, st.sampled_from(["load", "store"]), _dram(machine), _sticks(machine)),
        st.builds(_host, st.sampled_from(["h2d", "d2h"]), _dram(machine), _sticks(machine)),
        st.builds(_send, st.just(machine), core, st.data(), _sticks(machine)),
        st.builds(_multicast, st.just(machine), core, st.data(), _dram(machine), _sticks(machine)),
        st.builds(_strided, core, st.sampled_from(["load", "store"]), st.data(), _dram(machine)),
        st.builds(_matmul, st.just(machine), core, corelet, st.data()),
        st.builds(_sfu_lx, core, corelet, st.data()),
        st.builds(_fifo_group, core, corelet, st.data(), st.sampled_from(["through", "in", "out"])),
    )


def _sticks(machine: Machine) -> st.SearchStrategy[int]:
    """Short transfers, and ones around the in-flight budget."""
    budget = machine.dma.max_inflight_bytes // STICK_BYTES
    return st.one_of(st.integers(1, 32), st.integers(budget // 2, budget + 32))


def _dram(machine: Machine) -> st.SearchStrategy[int]:
    """An address near one of a few bases that share banks and rows in different ways."""
    d = machine.dram
    row_span = d.row_bytes * d.channels  # consecutive addresses of one row index
    bases = [0, row_span, (d.banks + 1) * row_span, 3 * d.banks * row_span, 1 << 24]
    return st.builds(lambda base, sticks: base + sticks * STICK_BYTES, st.sampled_from(bases),
                     st.integers(0, 255))


def _dma(core: int, op: str, dram: int, sticks: int) -> Step:
    return [(core, op, {"op": op, "dram": dram, "lx": 0 if op == "load" else LX_OUT, "bytes": sticks * STICK_BYTES})]


def _host(op: str, dram: int, sticks: int) -> Step:
    return [(-1, "pcie", {"op": op, "dram": dram, "bytes": sticks * STICK_BYTES})]


def _send(machine: Machine, core: int, data: st.DataObject, sticks: int) -> Step:
    to_core = data.draw(st.integers(0, machine.cores.count - 1).filter(lambda c: c != core))
    return [(core, "send", {"op": "send", "lx": 0, "to_core": to_core, "to_lx": LX_OUT,
                            "bytes": sticks * STICK_BYTES})]


def _multicast(machine: Machine, core: int, data: st.DataObject, dram: int, sticks: int) -> Step:
    """A load into several cores' LX from one DRAM read (the issuing core among them or not)."""
    most = min(machine.cores.count, machine.dma.multicast_max_cores)
    to = data.draw(st.lists(st.integers(0, machine.cores.count - 1), min_size=1, max_size=most, unique=True))
    return [(core, "load", {"op": "load", "dram": dram, "lx": 0, "to": to, "bytes": sticks * STICK_BYTES})]


def _strided(core: int, op: str, data: st.DataObject, dram: int) -> Step:
    """A strided descriptor: pieces of a few sticks, some stride apart (gaps of 0 to 40 sticks); sometimes a
    pattern on the LX side as well (one-stick pieces, gaps of 0 to 3 sticks)."""
    piece, pieces = data.draw(st.integers(1, 8)), data.draw(st.integers(1, 40))
    ins = {"op": op, "dram": dram, "lx": 0 if op == "load" else LX_OUT, "bytes": piece * pieces * STICK_BYTES,
           "piece": piece * STICK_BYTES, "stride": (piece + data.draw(st.integers(0, 40))) * STICK_BYTES}
    if data.draw(st.booleans()):
        ins.update(lx_piece=STICK_BYTES, lx_stride=data.draw(st.integers(1, 4)) * STICK_BYTES)
    return [(core, op, ins)]


def _matmul(machine: Machine, core: int, corelet: int, data: st.DataObject) -> Step:
    """A pass of at most rows_per_pass x cols_per_pass on a Spyre array; a GEMM of any shape on a plain one."""
    pt, plain = machine.pt, machine.pt.mode == "plain"
    ins = {"op": "matmul", "a": 0, "b": 256 * KB, "c": 768 * KB,
           "rows": data.draw(st.integers(1, 80 if plain else pt.rows_per_pass)), "k": data.draw(st.integers(1, 160)),
           "dtype": data.draw(st.sampled_from(sorted(pt.lanes)))}
    if data.draw(st.booleans()):
        ins["cols"] = data.draw(st.integers(1, 100 if plain else pt.cols_per_pass))
    if data.draw(st.booleans()):  # passes back to back, operands moving on
        ins |= {"repeat": data.draw(st.integers(2, 5)), "c_step": 128 * data.draw(st.integers(0, 8))}
    return [(core, f"pt{corelet}", ins)]


def _sfu(data: st.DataObject, ops: list[str], a: int | str, out: int | str) -> dict[str, Any]:
    """An SFU instruction of one of ``ops``, with the LX operands its arity needs."""
    op = data.draw(st.sampled_from(ops))
    spec = SFU_OPS[op]
    sticks = 64 * data.draw(st.integers(1, 2)) if spec.shape == "block" else data.draw(st.integers(1, 40))
    ins: dict[str, Any] = {"op": op, "a": a, "out": out, "sticks": sticks}
    if spec.shape in CAST_SHAPES:  # a cast between fp16 or bf16 and fp32
        half, full = data.draw(st.sampled_from(["fp16", "bf16"])), "fp32"
        ins |= {"dtype": half, "out_dtype": full} if spec.shape == "widen" else {"dtype": full, "out_dtype": half}
    for i, field in enumerate(SFU_OPERANDS[1:spec.arity], start=1):
        ins[field] = i * 128 * KB
    for field in SFU_OPERANDS[:spec.arity]:
        for how in ("broadcast", "splat"):
            if ins[field] != "fifo" and data.draw(st.booleans()):
                ins[f"{field}_{how}"] = True
    return ins


def _sfu_lx(core: int, corelet: int, data: st.DataObject) -> Step:
    return [(core, f"sfu{corelet}", _sfu(data, sorted(SFU_OPS), 0, LX_OUT))]


def _fifo_group(core: int, corelet: int, data: st.DataObject, kind: str) -> Step:
    """Sticks streamed through the corelet's FIFOs: LX -> SFU -> LX with a FIFO on either side or both."""
    maps = sorted(op for op, spec in SFU_OPS.items() if spec.shape == "map")
    ins = _sfu(data, maps, 0 if kind == "out" else "fifo", "fifo" if kind != "in" else LX_OUT)
    step = [(core, f"sfu{corelet}", ins)]
    nbytes = ins["sticks"] * STICK_BYTES
    if kind != "out":
        step.insert(0, (core, f"lx2fifo{corelet}", {"op": "lx2fifo", "lx": 0, "bytes": nbytes}))
    if kind != "in":
        step.append((core, f"fifo2lx{corelet}", {"op": "fifo2lx", "lx": LX_OUT, "bytes": nbytes}))
    return step


def _add_tokens(draw: st.DrawFn, steps: list[Step]) -> None:
    """Token edges from earlier steps to later ones: single ones, and counted ones (k signals, k waits)."""
    flat = [(i, ins) for i, step in enumerate(steps) for _, _, ins in step]
    for n in range(draw(st.integers(0, 2 * len(steps)))):
        split = draw(st.integers(1, len(steps)))
        before = [ins for i, ins in flat if i < split]
        after = [ins for i, ins in flat if i >= split]
        if not before or not after:
            continue
        count = draw(st.integers(1, min(3, len(before), len(after))))
        for side, field in ((before, "signal"), (after, "wait")):
            for k in draw(st.lists(st.sampled_from(range(len(side))), min_size=count, max_size=count, unique=True)):
                side[k].setdefault(field, []).append(f"t{n}")
