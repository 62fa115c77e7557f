"""Shared leaf: device number formats as numpy conversions (bytes <-> float32).

fp16 is IEEE binary16 here; the device's DLFloat16 rounding is a later refinement.
bf16 is the upper half of a float32, rounded to nearest even.
"""

from __future__ import annotations

import numpy as np

from ..errors import SpyreEmuError

_NUMPY = {"fp16": np.float16, "fp32": np.float32, "int8": np.int8, "int32": np.int32}


def to_f32(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Interpret uint8 bytes as ``dtype`` and widen to float32."""
    if dtype == "bf16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return raw.view(numpy_dtype(dtype)).astype(np.float32)


def from_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to ``dtype`` and return their bytes (uint8)."""
    values = np.ascontiguousarray(values, np.float32)
    if dtype == "bf16":
        bits = values.view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype(np.uint16).view(np.uint8)
    return values.astype(numpy_dtype(dtype)).view(np.uint8)


def numpy_dtype(dtype: str) -> type:
    if dtype == "bf16":
        return np.uint16
    if dtype not in _NUMPY:
        raise SpyreEmuError(f"functional mode does not support dtype {dtype!r} yet "
                            f"(supported: bf16, {', '.join(_NUMPY)})")
    return _NUMPY[dtype]
