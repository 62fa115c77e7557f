"""Integer codes shared by the unit program loader, the engine and the functional replay.

One table per concept: opcodes, the units of a core, and the SFU operations with their
cost class and arity (the SFU's timing depends only on the class, never on the op name).
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class Op(IntEnum):
    LOAD = 0      # DRAM -> LX over the ring, in bursts
    STORE = 1     # LX -> DRAM over the ring, in bursts
    SEND = 2      # LX -> another core's LX over the ring
    LX2FIFO = 3   # LX -> the corelet's input FIFO, one stick per cycle
    FIFO2LX = 4   # the corelet's output FIFO -> LX, one stick per cycle
    MATMUL = 5    # one PT pass: rows x K x 64 columns
    SFU = 6       # one vector operation over whole sticks
    H2D = 7       # host -> DRAM over PCIe
    D2H = 8       # DRAM -> host over PCIe


# The units of one core, in engine order; a corelet's units end in its index.
CORE_UNITS = ("load", "store", "send",
              "lx2fifo0", "fifo2lx0", "pt0", "sfu0",
              "lx2fifo1", "fifo2lx1", "pt1", "sfu1")
HOST_UNIT = "pcie"

class SfuOp(NamedTuple):
    code: int
    cost_class: str   # a key of [sfu.cost_cycles]
    arity: int        # operands read per output stick
    shape: str        # "map": n sticks -> n; "sticks": n -> 1 (lane-wise across sticks);
                      # "lanes": each stick -> its lane reduction broadcast to all lanes;
                      # "block": each square block of lanes x lanes elements -> its transpose;
                      # "widen": each stick's low or high half -> one stick of twice the element width;
                      # "narrow": two sticks (a's lanes, then b's) -> one stick of half the element width


_SFU = [
    ("copy", "simple", 1, "map"), ("neg", "simple", 1, "map"), ("abs", "simple", 1, "map"),
    ("relu", "simple", 1, "map"), ("add", "simple", 2, "map"), ("sub", "simple", 2, "map"),
    ("mul", "simple", 2, "map"), ("max", "simple", 2, "map"), ("min", "simple", 2, "map"),
    ("div", "transcendental", 2, "map"), ("exp", "transcendental", 1, "map"),
    ("log", "transcendental", 1, "map"), ("sqrt", "transcendental", 1, "map"),
    ("rsqrt", "transcendental", 1, "map"), ("reciprocal", "transcendental", 1, "map"),
    ("tanh", "transcendental", 1, "map"), ("sigmoid", "transcendental", 1, "map"),
    ("silu", "transcendental", 1, "map"), ("gelu", "transcendental", 1, "map"),
    ("reduce_sum", "reduce", 1, "sticks"), ("reduce_max", "reduce", 1, "sticks"),
    ("lanes_sum", "reduce", 1, "lanes"), ("lanes_max", "reduce", 1, "lanes"),
    ("gt", "simple", 2, "map"), ("ge", "simple", 2, "map"), ("lt", "simple", 2, "map"),
    ("le", "simple", 2, "map"), ("eq", "simple", 2, "map"), ("ne", "simple", 2, "map"),
    ("where", "simple", 3, "map"), ("splat", "simple", 1, "map"), ("transpose", "simple", 1, "block"),
    ("cos", "transcendental", 1, "map"), ("sin", "transcendental", 1, "map"),
    # casts: read sticks of ``dtype``, write sticks of ``out_dtype``, one simple step per output stick
    ("widen_lo", "simple", 1, "widen"), ("widen_hi", "simple", 1, "widen"), ("narrow", "simple", 2, "narrow"),
]
SFU_OPS = {name: SfuOp(code, cls, arity, shape) for code, (name, cls, arity, shape) in enumerate(_SFU)}
SFU_NAMES = tuple(SFU_OPS)
CAST_SHAPES = {"widen": 2, "narrow": 0.5}  # output element width over the input's
SFU_OPERANDS = ("a", "b", "c")  # an SFU op of arity n reads the first n of these

# Which unit kind runs which instruction op (by the unit name without its corelet index).
UNIT_OPS = {"load": {"load"}, "store": {"store"}, "send": {"send"},
            "lx2fifo": {"lx2fifo"}, "fifo2lx": {"fifo2lx"}, "pt": {"matmul"},
            "sfu": set(SFU_NAMES), HOST_UNIT: {"h2d", "d2h"}}


def unit_kind(unit: str) -> str:
    """``"pt1"`` -> ``"pt"``: the unit name without its corelet index."""
    return unit.rstrip("01")
