"""Number formats: fp8 E4M3 codes and rounding, bf16 rounding, round trips of every format."""

import numpy as np
import pytest

from spyre_emu.errors import SpyreEmuError
from spyre_emu.numerics import from_f32, numpy_dtype, to_f32


def test_e4m3_known_codes():
    values = np.array([0.0, 1.0, 1.125, 448.0, 2.0 ** -9, -2.5, 2.0 ** -6], np.float32)
    # sign | 4 exponent bits (bias 7) | 3 mantissa bits; 2^-9 is the smallest subnormal
    assert from_f32(values, "fp8").tolist() == [0x00, 0x38, 0x39, 0x7E, 0x01, 0xC2, 0x08]
    np.testing.assert_array_equal(to_f32(from_f32(values, "fp8"), "fp8"), values)


def test_e4m3_rounds_to_nearest_even_and_saturates():
    values = np.array([1.0625, 1.1875, 1.1, 500.0, -1e9, 1e-9], np.float32)
    assert to_f32(from_f32(values, "fp8"), "fp8").tolist() == [1.0, 1.25, 1.125, 448.0, -448.0, 0.0]
    assert np.isnan(to_f32(from_f32(np.array([np.nan], np.float32), "fp8"), "fp8")).all()


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "fp8", "int8", "int32"])
def test_every_representable_value_round_trips(dtype):
    values = np.array([0, 1, -2, 3, 64, -96], np.float32)
    np.testing.assert_array_equal(to_f32(from_f32(values, dtype), dtype), values)
    assert from_f32(values, dtype).size == values.size * np.dtype(numpy_dtype(dtype)).itemsize


def test_unknown_format_is_a_clear_error():
    with pytest.raises(SpyreEmuError, match="functional mode does not support dtype 'int4'"):
        numpy_dtype("int4")
