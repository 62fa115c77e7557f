"""DLFloat16, the card's 16-bit float (torch-spyre stores a torch float16 on the card as SEN169_FP16).

1 sign, 6 exponent (bias 31) and 9 fraction bits, every code normal: there are no subnormals,
code 0 (either sign) is zero, so the smallest magnitude is 0x0001 = 2^-31 (1 + 2^-9) and the
largest 0x7FFE = 2^32 (1 + 510/512) = 8,573,157,376. 0x7FFF (either sign) is NINF, the one
code for infinity and NaN: an overflow, an infinity or a NaN all become NINF with their sign.
Rounding adds half a unit in the last place to the magnitude and truncates: ties go away from
zero (IEEE rounds them to even). Magnitudes that do not reach 0x0001 flush to zero.

Sources: the NNP data format 1 conversions in onnx-mlir
(``src/Accelerators/NNPA/Support/Stickify/DLF16Conversion.hpp``, class ``NNP1``) and zDNN's
``zdnn_fl32_to_dlflt16`` (``convert.c``); torch-spyre ``torch_spyre/csrc/types_mapping.h`` maps
float16 to IEEE_FP16 on the host and SEN169_FP16 on the card.
Assumed: inside the card NINF reads as an infinity of its sign (the host-side decoders above read
it as NaN; what the SFU does with it is not published), so that -inf masks stay masks.
"""

from __future__ import annotations

import numpy as np

BIAS = 31
NINF = 0x7FFF
MAX = float(2.0 ** 32 * (1 + 510 / 512))

_F32_BIAS = 127
_HALF_ULP = 1 << 13  # half of DLFloat16's last fraction bit, in float32's 23 fraction bits


def encode(values: np.ndarray) -> np.ndarray:
    """float32 values -> DLFloat16 codes (uint16), rounded half away from zero: a lookup by the top 19
    bits of each float32 (sign, exponent, the 9 kept fraction bits and the rounding bit; adding half
    a unit at bit 13 carries past it only when bit 13 is set, so the 13 bits below never count)."""
    return _ENCODED[np.ascontiguousarray(values, np.float32).view(np.uint32) >> 13]


def _encode_bits(bits: np.ndarray) -> np.ndarray:
    sign = ((bits >> 16) & 0x8000).astype(np.uint16)
    exp = ((bits >> 23) & 0xFF).astype(np.int32)
    frac = (bits & 0x7FFFFF) + _HALF_ULP
    carry = frac >> 23  # the rounding carried into the exponent
    exp = exp - _F32_BIAS + BIAS + carry.astype(np.int32)
    frac = np.where(carry == 1, 0, frac) >> 14
    code = (np.clip(exp, 0, 63).astype(np.uint16) << 9) | frac.astype(np.uint16)
    code = np.where(exp < 0, 0, code)  # underflow (float32's zeros and subnormals too)
    code = np.where((exp > 63) | (code == NINF), NINF, code)  # overflow (float32's inf and NaN too)
    return (code | sign).astype(np.uint16)


def decode(codes: np.ndarray) -> np.ndarray:
    """DLFloat16 codes (uint16) -> float32, exactly (NINF -> an infinity of its sign): a lookup in
    the table of all 65,536 codes, one numpy call where the bit arithmetic took ten (the functional
    replay decodes every operand it reads)."""
    return _DECODED[np.asarray(codes, np.uint16)]


def _decode_bits(codes: np.ndarray) -> np.ndarray:
    codes = codes.astype(np.uint32)
    mag = codes & 0x7FFF
    bits = ((codes & 0x8000) << 16) | (((mag >> 9) + _F32_BIAS - BIAS) << 23) | ((mag & 0x1FF) << 14)
    bits = np.where(mag == 0, codes << 16, bits)
    bits = np.where(mag == NINF, ((codes & 0x8000) << 16) | 0x7F800000, bits)
    return bits.astype(np.uint32).view(np.float32)


_DECODED = _decode_bits(np.arange(1 << 16, dtype=np.uint32))
_ENCODED = _encode_bits(np.arange(1 << 19, dtype=np.uint32) << 13)
