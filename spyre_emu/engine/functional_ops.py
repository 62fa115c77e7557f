"""The SFU's numerics in float32: one numpy definition per SFU op of the opcode table."""

from __future__ import annotations

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float32))


_MAP = {
    "copy": lambda x, b: x, "neg": lambda x, b: -x, "abs": lambda x, b: np.abs(x),
    "relu": lambda x, b: np.maximum(x, 0), "add": lambda x, b: x + b, "sub": lambda x, b: x - b,
    "mul": lambda x, b: x * b, "max": np.maximum, "min": np.minimum, "div": lambda x, b: x / b,
    "exp": lambda x, b: np.exp(x), "log": lambda x, b: np.log(x), "sqrt": lambda x, b: np.sqrt(x),
    "rsqrt": lambda x, b: 1 / np.sqrt(x), "reciprocal": lambda x, b: 1 / x,
    "tanh": lambda x, b: np.tanh(x), "sigmoid": lambda x, b: 1 / (1 + np.exp(-x)),
    "silu": lambda x, b: x / (1 + np.exp(-x)), "gelu": lambda x, b: _gelu(x),
    "reduce_sum": lambda x, b: x.sum(axis=0, keepdims=True),
    "reduce_max": lambda x, b: x.max(axis=0, keepdims=True),
    "lanes_sum": lambda x, b: np.repeat(x.sum(axis=1, keepdims=True), x.shape[1], axis=1),
    "lanes_max": lambda x, b: np.repeat(x.max(axis=1, keepdims=True), x.shape[1], axis=1),
}


def sfu_apply(op: str, x: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    """``x`` and ``b`` are [sticks, lanes] float32; returns float32 of the op's output shape."""
    with np.errstate(all="ignore"):
        return np.asarray(_MAP[op](x, b), np.float32)
