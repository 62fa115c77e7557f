"""DLFloat16 (the card's fp16) bit for bit: codes derived by hand from 1 sign | 6 exponent bits
(bias 31) | 9 fraction bits, no subnormals, 0x7FFF NINF, ties away from zero."""

import numpy as np
import pytest

from spyre_emu.numerics import dlfloat16, from_f32, to_card, to_f32, to_host, value_range


def _codes(values):
    return [hex(c) for c in dlfloat16.encode(np.array(values, np.float32))]


def test_known_codes_and_their_values():
    cases = [
        (1.0, 0x3E00),                               # exponent 31 (2^0), fraction 0
        (-2.0, 0xC000),                              # sign, exponent 32
        (1.5, 0x3F00),                               # fraction 256/512
        (0.0, 0x0000),
        (-0.0, 0x8000),
        (2.0 ** 32 * (1 + 510 / 512), 0x7FFE),       # the largest finite value, 8,573,157,376
        (2.0 ** -31 * (1 + 1 / 512), 0x0001),        # the smallest magnitude: exponent 0 is not subnormal
        (2.0 ** -30, 0x0200),
        (65536.0, 0x5E00),                           # exponent 16 + 31 = 47
    ]
    values, codes = zip(*cases, strict=True)
    assert _codes(values) == [hex(c) for c in codes]
    decoded = dlfloat16.decode(np.array(codes, np.uint16))
    np.testing.assert_array_equal(decoded, np.array(values, np.float32))
    assert np.signbit(decoded).tolist() == np.signbit(values).tolist()
    assert dlfloat16.MAX == 8_573_157_376.0 == value_range("fp16")[1]


def test_ties_round_away_from_zero():
    """Half a unit in the last place (2^-10 at 1.0) goes up in magnitude, where IEEE goes to even."""
    values = [1 + 2 ** -10, -(1 + 2 ** -10), 1 + 3 * 2 ** -10, 1 + 2 ** -10 - 2 ** -20, 2 - 2 ** -11]
    # 1 + 2^-9 | its negative | 1 + 2 * 2^-9 (IEEE's even would also go up) | below the tie: down | 2.0
    assert _codes(values) == ["0x3e01", "0xbe01", "0x3e02", "0x3e00", "0x4000"]


def test_overflow_infinities_and_nan_are_ninf_with_their_sign():
    ulp = 2.0 ** 23  # at 2^32
    values = [2.0 ** 32 * (1 + 510 / 512) + ulp / 2 - 512,  # below the tie: the largest value
              2.0 ** 32 * (1 + 510 / 512) + ulp / 2,        # rounds into 0x7FFF, which is NINF
              2.0 ** 33, np.inf, -np.inf, np.nan, -3e38]
    assert _codes(values) == ["0x7ffe", "0x7fff", "0x7fff", "0x7fff", "0xffff", "0x7fff", "0xffff"]
    assert dlfloat16.decode(np.array([0x7FFF, 0xFFFF], np.uint16)).tolist() == [np.inf, -np.inf]


def test_underflow_flushes_to_zero():
    """No subnormals: 2^-31 itself is code 0 (zero); rounding can lift a value to 0x0001."""
    tiny = 2.0 ** -31
    values = [tiny, -tiny, tiny / 2, tiny * (1 + 2 ** -10), 1e-45, tiny * (1 + 2 ** -10 - 2 ** -20)]
    assert _codes(values) == ["0x0", "0x8000", "0x0", "0x1", "0x0", "0x0"]


def test_what_ieee_fp16_cannot_hold_and_dlfloat16_can():
    """1e6 is inf in IEEE fp16, 1e-9 is 0; DLFloat16 holds them to 9 fraction bits."""
    values = np.array([1e6, 1e-9, 65536.0], np.float32)
    # 1e6 = 2^19 * 1.9073486: fraction 464.56/512 -> 465; 1e-9 = 2^-30 * 1.0737418: 37.75 -> 38
    assert _codes(values) == ["0x65d1", "0x226", "0x5e00"]
    assert to_f32(from_f32(values, "fp16"), "fp16").tolist() == [
        2.0 ** 19 * (1 + 465 / 512), 2.0 ** -30 * (1 + 38 / 512), 65536.0]
    with np.errstate(over="ignore"):
        assert np.isinf(values.astype(np.float16)[0])
        assert values.astype(np.float16)[1] == 0


def test_what_dlfloat16_cannot_hold_and_ieee_fp16_can():
    """IEEE fp16's tenth fraction bit and its largest value; its subnormals (at most 10 significant
    bits, from 2^-24) all fit."""
    host = np.array([1 + 2 ** -10, 65504.0, 2047.0, 2.0 ** -24 * 1023, 2.0 ** -24], np.float16)
    held = to_host(to_card(host, "fp16"), "fp16")
    # ties away: 1 + 2^-9; 65504 = 2^15 * (1 + 1023/1024) -> 2^16, over IEEE's range on the way
    # back: inf; 2047 -> 2048; 1023 * 2^-24 = 2^-15 * (1 + 511/512) and 2^-24 exactly
    assert held.tolist() == [1 + 2 ** -9, np.inf, 2048.0, 2.0 ** -24 * 1023, 2.0 ** -24]
    assert to_card(host, "fp16").dtype == np.uint16
    assert hex(to_card(host, "fp16")[1]) == "0x5e00"


@pytest.mark.parametrize("code", [0x0001, 0x1234, 0x3E00, 0x7FFE, 0x8001, 0xC321, 0xFFFE])
def test_every_finite_code_round_trips(code):
    assert dlfloat16.encode(dlfloat16.decode(np.array([code], np.uint16)))[0] == code


def test_all_codes_decode_exactly_and_in_order():
    codes = np.arange(1, 0x7FFF, dtype=np.uint16)
    values = dlfloat16.decode(codes)
    assert np.all(np.diff(values) > 0)  # monotonic: no code is a subnormal or a NaN
    np.testing.assert_array_equal(dlfloat16.encode(values), codes)
    np.testing.assert_array_equal(dlfloat16.decode(codes | 0x8000), -values)


def test_lookup_tables_equal_the_bit_arithmetic():
    """encode looks up the top 19 bits of a float32: the 13 below never change the code."""
    rng = np.random.default_rng(3)
    top = np.arange(1 << 19, dtype=np.uint32) << 13
    for bits in (top, top | 0x1FFF, top | rng.integers(0, 1 << 13, top.size, dtype=np.uint32),
                 rng.integers(0, 1 << 32, 1 << 20, dtype=np.uint32)):
        assert np.array_equal(dlfloat16.encode(bits.view(np.float32)), dlfloat16._encode_bits(bits))
    codes = np.arange(1 << 16, dtype=np.uint32)
    assert np.array_equal(dlfloat16.decode(codes).view(np.uint32), dlfloat16._decode_bits(codes).view(np.uint32))
