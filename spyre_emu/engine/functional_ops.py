"""The SFU's numerics in float32: one numpy definition per SFU op of the opcode table."""

from __future__ import annotations

import math

import numpy as np

_erf = np.frompyfunc(math.erf, 1, 1)


def _gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)).astype(np.float32))


def _transpose(x: np.ndarray) -> np.ndarray:
    lanes = x.shape[1]
    return x.reshape(-1, lanes, lanes).transpose(0, 2, 1).reshape(x.shape)


def _half(x: np.ndarray, which: int) -> np.ndarray:
    """Lanes [0, L/2) or [L/2, L) of each stick: the elements one widened output stick holds."""
    half = x.shape[1] // 2
    return x[:, which * half:(which + 1) * half]


def _flag(cond: np.ndarray) -> np.ndarray:
    return cond.astype(np.float32)


_MAP = {
    "copy": lambda x: x, "neg": lambda x: -x, "abs": np.abs, "relu": lambda x: np.maximum(x, 0),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "div": np.divide, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)), "gelu": _gelu,
    "reduce_sum": lambda x: x.sum(axis=0, keepdims=True),
    "reduce_max": lambda x: x.max(axis=0, keepdims=True),
    "lanes_sum": lambda x: np.repeat(x.sum(axis=1, keepdims=True), x.shape[1], axis=1),
    "lanes_max": lambda x: np.repeat(x.max(axis=1, keepdims=True), x.shape[1], axis=1),
    "gt": lambda x, b: _flag(x > b), "ge": lambda x, b: _flag(x >= b), "lt": lambda x, b: _flag(x < b),
    "le": lambda x, b: _flag(x <= b), "eq": lambda x, b: _flag(x == b), "ne": lambda x, b: _flag(x != b),
    "where": lambda cond, b, c: np.where(cond != 0, b, c),
    "splat": lambda x: np.repeat(x[:, :1], x.shape[1], axis=1), "transpose": _transpose,
    "cos": np.cos, "sin": np.sin,
    "widen_lo": lambda x: _half(x, 0), "widen_hi": lambda x: _half(x, 1),
    "narrow": lambda a, b: np.concatenate([a, b], axis=1),
}


def sfu_apply(op: str, *operands: np.ndarray) -> np.ndarray:
    """Operands are [sticks, lanes] float32 (``a``, then ``b``, ``c`` for ops that take them);
    returns float32 of the op's output shape (a cast's output sticks have its output type's lanes)."""
    with np.errstate(all="ignore"):
        return np.asarray(_MAP[op](*operands), np.float32)
