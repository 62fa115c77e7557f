"""The op table: each SuperDSC op name, its lowering family and (pointwise) its SFU op.

One literal table, not a registry filled by imports: a new op is one line here. Families
are lowered by ``spyre_emu.lowering``; a family without a lowering yet is refused there
with a clear error naming the op.
"""

from __future__ import annotations

from typing import NamedTuple


class OpSpec(NamedTuple):
    family: str        # "pointwise", "reduction", "matmul", "normalization", "select", "restickify"
    arity: int         # tensor inputs
    sfu_op: str | None  # the SFU op a pointwise kernel streams every stick through


OPS: dict[str, OpSpec] = {
    "add": OpSpec("pointwise", 2, "add"),
    "sub": OpSpec("pointwise", 2, "sub"),
    "mul": OpSpec("pointwise", 2, "mul"),
    "realdiv": OpSpec("pointwise", 2, "div"),
    "maximum": OpSpec("pointwise", 2, "max"),
    "neg": OpSpec("pointwise", 1, "neg"),
    "abs": OpSpec("pointwise", 1, "abs"),
    "exp": OpSpec("pointwise", 1, "exp"),
    "log": OpSpec("pointwise", 1, "log"),
    "sqrt": OpSpec("pointwise", 1, "sqrt"),
    "rsqrt": OpSpec("pointwise", 1, "rsqrt"),
    "reciprocal": OpSpec("pointwise", 1, "reciprocal"),
    "tanh": OpSpec("pointwise", 1, "tanh"),
    "sigmoid": OpSpec("pointwise", 1, "sigmoid"),
    "silu": OpSpec("pointwise", 1, "silu"),
    "gelufwd": OpSpec("pointwise", 1, "gelu"),
    "relufwd": OpSpec("pointwise", 1, "relu"),
    "identity": OpSpec("pointwise", 1, "copy"),
    "sum": OpSpec("reduction", 1, None),
    "mean": OpSpec("reduction", 1, None),
    "max": OpSpec("reduction", 1, None),
    "min": OpSpec("reduction", 1, None),
    "batchmatmul": OpSpec("matmul", 2, None),
    "layernormscale": OpSpec("normalization", 1, None),
    "layernormnorm": OpSpec("normalization", 3, None),
    "where3": OpSpec("select", 3, None),
    "ReStickifyOpHBM": OpSpec("restickify", 1, None),
}
