"""Shared leaf: device number formats as numpy conversions (bytes <-> float32).

fp16 is IEEE binary16 on the host and DLFloat16 on the card (``dlfloat16.py``): ``to_f32`` and
``from_f32`` read and write the card's bytes, ``to_card`` and ``to_host`` convert at the PCIe
boundary (IEEE fp16 -> DLFloat16 rounds ties away from zero; back, IEEE rounds to nearest even,
and a magnitude over 65504 becomes inf). bf16 is the upper half of a float32, rounded to nearest
even. fp8 is E4M3 (OCP "FN": no infinities, 448 the largest value, one NaN per sign), rounded to
nearest even and saturating.
Host arrays of bf16 and fp8 hold their raw bits (uint16, uint8): numpy has no such types.
"""

from __future__ import annotations

import numpy as np

from ..errors import SpyreEmuError
from . import dlfloat16

_NUMPY = {"fp16": np.float16, "fp32": np.float32, "int8": np.int8, "int32": np.int32, "bf16": np.uint16,
          "fp8": np.uint8}


def _e4m3_values() -> np.ndarray:
    """float32 value of every fp8 E4M3 code 0..255."""
    code = np.arange(256)
    exp, mant = (code >> 3) & 0xF, (code & 7).astype(np.float64)
    mag = np.where(exp == 0, mant / 8 * 2.0 ** -6, (1 + mant / 8) * 2.0 ** (exp - 7))
    mag[(exp == 15) & (mant == 7)] = np.nan
    return np.where(code >> 7, -mag, mag).astype(np.float32)


_E4M3 = _e4m3_values()
_E4M3_POSITIVE = _E4M3[:0x7F]  # 0 .. 448, ascending with the code


def to_f32(raw: np.ndarray, dtype: str) -> np.ndarray:
    """Interpret uint8 bytes as ``dtype`` and widen to float32."""
    if dtype == "bf16":
        return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    if dtype == "fp8":
        return _E4M3[raw.view(np.uint8)]
    if dtype == "fp16":
        return dlfloat16.decode(raw.view(np.uint16))
    return raw.view(numpy_dtype(dtype)).astype(np.float32)


def from_f32(values: np.ndarray, dtype: str) -> np.ndarray:
    """Round float32 values to ``dtype`` and return their bytes (uint8)."""
    values = np.ascontiguousarray(values, np.float32)
    if dtype == "bf16":
        bits = values.view(np.uint32)
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        return rounded.astype(np.uint16).view(np.uint8)
    if dtype == "fp8":
        return _to_e4m3(values)
    if dtype == "fp16":
        return dlfloat16.encode(values).view(np.uint8)
    return values.astype(numpy_dtype(dtype)).view(np.uint8)


def to_card(array: np.ndarray, dtype: str) -> np.ndarray:
    """A host array's elements as the card stores them (fp16: DLFloat16 codes, uint16); same shape."""
    if dtype != "fp16":
        return array
    return dlfloat16.encode(np.asarray(array, np.float16).astype(np.float32)).reshape(np.shape(array))


def to_host(elements: np.ndarray, dtype: str) -> np.ndarray:
    """Card elements (any numpy view of their bytes) as the host array ``numpy_dtype(dtype)``."""
    if dtype != "fp16":
        return elements
    with np.errstate(over="ignore"):  # over 65504: inf, as IEEE rounding gives
        return dlfloat16.decode(elements.view(np.uint16)).astype(np.float16)


def host_array(values: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values as a host array of ``dtype`` (bf16 and fp8 as their raw bits)."""
    if dtype == "fp16":
        return np.asarray(values, np.float32).astype(np.float16)
    return from_f32(values, dtype).view(numpy_dtype(dtype)).reshape(np.shape(values))


def _to_e4m3(values: np.ndarray) -> np.ndarray:
    """Nearest E4M3 code (ties to the even code), saturating at 448; NaN stays NaN."""
    mag = np.minimum(np.abs(values), 448.0)
    hi = np.clip(np.searchsorted(_E4M3_POSITIVE, mag), 1, len(_E4M3_POSITIVE) - 1)
    lo = hi - 1
    d_lo, d_hi = mag - _E4M3_POSITIVE[lo], _E4M3_POSITIVE[hi] - mag
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    code = np.where(np.isnan(values), 0x7F, code) | (np.signbit(values) << 7)
    return code.astype(np.uint8)


def value_range(dtype: str) -> tuple[float, float]:
    """The finite values ``dtype`` holds on the card (fp16: DLFloat16's, to 8.6e9; bf16: float32's
    exponent range; fp8 E4M3: up to 448)."""
    if dtype in ("int8", "int32"):
        info = np.iinfo(_NUMPY[dtype])
        return float(info.min), float(info.max)
    top = {"fp16": dlfloat16.MAX, "fp8": 448.0}.get(dtype, float(np.finfo(np.float32).max))
    return -top, top


def numpy_dtype(dtype: str) -> type:
    """The numpy type of a host array (and of raw device elements) of ``dtype``."""
    if dtype not in _NUMPY:
        raise SpyreEmuError(f"functional mode does not support dtype {dtype!r} (supported: {', '.join(_NUMPY)})")
    return _NUMPY[dtype]
