"""The op table: each op name, its lowering family and (pointwise) its SFU steps.

Names are SuperDSC's where SuperDSC has the op; ``to_dtype`` is Inductor's (torch-spyre drops
conversions so far); ``cat``, ``minimum``, ``cos``, ``sin``, the comparisons, and the fused
row ops ``softmax``, ``layernorm`` and ``rmsnorm`` (one kernel each, as the front end's fusion
pass emits them) are spyre-emu's own. One literal table, not a registry filled by imports: a
new op is one line here. Families are lowered by ``spyre_emu.lowering``.
"""

from __future__ import annotations

from typing import NamedTuple

Step = tuple[str, tuple[int | str, ...]]  # an SFU op and its operands: input index, or "t" (the result so far)


class OpSpec(NamedTuple):
    family: str               # a key of lowering.FAMILIES: "pointwise", "reduction", "matmul", "concat", ...
    arity: int                # tensor inputs
    sfu: str | tuple[Step, ...] | None = None  # pointwise: the SFU op over every input, or SFU steps
    or_more: bool = False     # arity is the fewest inputs the op takes (cat: two or more)


OPS: dict[str, OpSpec] = {
    "add": OpSpec("pointwise", 2, "add"),
    "sub": OpSpec("pointwise", 2, "sub"),
    "mul": OpSpec("pointwise", 2, "mul"),
    "realdiv": OpSpec("pointwise", 2, "div"),
    "maximum": OpSpec("pointwise", 2, "max"),
    "minimum": OpSpec("pointwise", 2, "min"),
    "greater": OpSpec("pointwise", 2, "gt"),
    "greaterequal": OpSpec("pointwise", 2, "ge"),
    "less": OpSpec("pointwise", 2, "lt"),
    "lessequal": OpSpec("pointwise", 2, "le"),
    "equal": OpSpec("pointwise", 2, "eq"),
    "notequal": OpSpec("pointwise", 2, "ne"),
    "where3": OpSpec("pointwise", 3, "where"),
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
    "cos": OpSpec("pointwise", 1, "cos"),
    "sin": OpSpec("pointwise", 1, "sin"),
    "identity": OpSpec("pointwise", 1, "copy"),
    # (x - mean) * rstd * weight + bias, every operand broadcast to x's shape
    "layernormnorm": OpSpec("pointwise", 5, (("sub", (0, 1)), ("mul", ("t", 2)), ("mul", ("t", 3)),
                                             ("add", ("t", 4)))),
    "sum": OpSpec("reduction", 1),
    "mean": OpSpec("reduction", 1),
    "max": OpSpec("reduction", 1),
    "min": OpSpec("reduction", 1),
    "batchmatmul": OpSpec("matmul", 2),
    "layernormscale": OpSpec("rowwise", 1),
    "softmax": OpSpec("rowwise", 1),
    "layernorm": OpSpec("rowwise", 3),
    "rmsnorm": OpSpec("rowwise", 2),
    "ReStickifyOpHBM": OpSpec("restickify", 1),
    "to_dtype": OpSpec("cast", 1),  # Inductor's name for a cast: the input's values in the output's dtype
    "embedding": OpSpec("gather", 2),  # y[r] = table[index[r]]: table rows picked by int32 indices on the card
    "patches": OpSpec("patches", 1),  # a channels-last image's windows as rows (convolution, pooling)
    "cat": OpSpec("concat", 2, or_more=True),  # y = cat(inputs, dim): whole sticks moved by DMA
}
# The ops that take attributes, with their defaults (any other op takes none).
# safe: a row whose every entry is -inf gives zeros, not NaN (torch's scaled_dot_product_attention).
ATTRS = {"layernormscale": {"eps": 1e-5, "rms": False}, "layernorm": {"eps": 1e-5}, "rmsnorm": {"eps": 1e-5},
         "softmax": {"safe": False},
         "ReStickifyOpHBM": {"x_shape": [], "perm": [], "window": []},  # x_shape: x read in this shape (the same
         # elements row-major; [] keeps x's); perm: its dims in y's order ([] keeps them); window: a start and a stop
         # per dim of it, flat ([] takes all): y = x.reshape(x_shape)[window].permute(perm).reshape(y.shape)
         "patches": {"image": [], "kernel": [1, 1], "stride": [1, 1], "padding": [0, 0], "dilation": [1, 1],
                     "pad": 0.0},
         "cat": {"dim": 0}}
