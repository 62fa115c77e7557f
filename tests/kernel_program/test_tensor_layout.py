"""SpyreTensorLayout: torch-spyre's published layouts, host <-> device round trips, rejected layouts."""

import numpy as np
import pytest

from spyre_emu.errors import ProgramError, SpyreEmuError
from spyre_emu.kernel_program import (
    TensorLayout,
    check_layout,
    default_layout,
    device_bytes,
    dim_map,
    from_device,
    host_strides,
    to_device,
)

WIDTH = {"fp16": np.uint16, "bf16": np.uint16, "fp32": np.uint32, "int32": np.uint32, "int8": np.uint8,
         "fp8": np.uint8}


def _random(shape, dtype, seed=0):
    """Random bit patterns of ``dtype``'s width (bf16 and fp8 are raw bits on the host)."""
    bits = np.random.default_rng(seed).integers(0, np.iinfo(WIDTH[dtype]).max, size=shape, dtype=WIDTH[dtype])
    return bits.view({"fp16": np.float16, "fp32": np.float32, "int8": np.int8}.get(dtype, bits.dtype))


def _reference_image(host, layout):
    """The device array built element by element from what stride_map means."""
    flat, strides, owners = host.reshape(-1), host_strides(layout.shape), dim_map(layout)
    image = np.zeros(layout.device_size, host.dtype)
    for coord in np.ndindex(*layout.device_size):
        host_coord = [0] * len(layout.shape)
        for j, c in enumerate(coord):
            if owners[j] >= 0:
                host_coord[owners[j]] += c * layout.stride_map[j] // strides[owners[j]]
        unmapped = [c for j, c in enumerate(coord) if owners[j] < 0]
        if any(unmapped) or any(h >= n for h, n in zip(host_coord, layout.shape, strict=True)):
            continue  # padding
        offset = sum(c * s for c, s in zip(coord, layout.stride_map, strict=True) if s > 0)
        assert offset == sum(h * s for h, s in zip(host_coord, strides, strict=True))
        image[coord] = flat[offset]
    return image


def test_published_example():
    """torch-spyre docs/TensorLayouts.md: x = torch.rand(5, 100, 150, dtype=torch.float16).to("spyre")."""
    layout = default_layout((5, 100, 150), "fp16")
    assert layout.device_size == (100, 3, 5, 64)
    assert layout.stride_map == (150, 64, 15000, 1)
    assert dim_map(layout) == (1, 2, 0, 2)
    assert device_bytes(layout) == 1500 * 128  # 100 x 3 x 5 sticks


def test_published_example_pads_the_last_stick_with_zeros():
    host = np.arange(5 * 100 * 150, dtype=np.float16).reshape(5, 100, 150) + np.float16(1)
    layout = default_layout(host.shape, "fp16")
    image = to_device(host, layout).view(np.float16).reshape(layout.device_size)
    assert not image[:, 2, :, 150 - 128:].any()  # 150 = 2 sticks + 22 elements
    assert image[7, 1, 3, 5] == host[3, 7, 64 + 5]


@pytest.mark.parametrize(("shape", "dtype", "dim_order", "device_size", "stride_map"), [
    # torch-spyre docs/TensorLayouts.md: dim_order [1, 0, 2] "inverts the tiling"
    ((5, 100, 150), "fp16", [1, 0, 2], (5, 3, 100, 64), (15000, 64, 150, 1)),
    ((63, 129), "fp16", None, (3, 63, 64), (64, 129, 1)),
    # stick dim 0: one stick of 63 rows; the stick-count dim (size 1) is capped at the dim's extent
    ((63, 129), "fp16", [1, 0], (1, 129, 64), (63 * 129, 1, 129)),
    ((100,), "int8", None, (1, 128), (100, 1)),
    ((2, 70, 3), "fp16", [2, 0, 1], (2, 2, 3, 64), (210, 192, 1, 3)),
    ((3, 7, 9), "fp32", [2, 0, 1], (3, 1, 9, 32), (63, 63, 1, 9)),
    ((2, 3, 5, 70), "bf16", None, (3, 5, 2, 2, 64), (350, 70, 64, 1050, 1)),
    ((4, 3, 2, 200), "int8", [3, 2, 1, 0], (2, 3, 1, 200, 128), (200, 400, 4800, 1, 1200)),
    # host dims of size 1 step nothing
    ((5, 1), "fp16", None, (1, 5, 64), (-1, 1, -1)),
    ((), "fp32", None, (1, 32), (-1, -1)),
])
def test_hand_computed_layouts(shape, dtype, dim_order, device_size, stride_map):
    layout = default_layout(shape, dtype, dim_order)
    assert (layout.device_size, layout.stride_map) == (device_size, stride_map)
    check_layout(layout)


@pytest.mark.parametrize(("shape", "dtype", "dim_order"), [
    ((63, 129), "fp16", None),
    ((63, 129), "fp16", [1, 0]),
    ((3, 7, 9), "fp32", None),
    ((3, 7, 9), "fp32", [2, 0, 1]),
    ((200,), "int8", None),
    ((5,), "fp16", None),
    ((2, 3, 5, 70), "bf16", None),
    ((2, 3, 5, 70), "bf16", [3, 1, 0, 2]),
    ((4, 3, 2, 20), "int8", [3, 2, 1, 0]),
    ((3, 1, 40), "int32", None),
    ((6, 1), "fp8", None),
    ((), "fp16", None),
])
def test_round_trip_places_every_element_where_stride_map_says(shape, dtype, dim_order):
    host = _random(shape, dtype)
    layout = default_layout(shape, dtype, dim_order)
    image = to_device(host, layout)
    assert image.dtype == np.uint8
    assert image.size == device_bytes(layout)
    assert np.array_equal(image, _reference_image(host, layout).reshape(-1).view(np.uint8))
    back = from_device(bytes(image), layout)
    assert back.shape == host.shape
    assert np.array_equal(back.view(WIDTH[dtype]), host.view(WIDTH[dtype]))


def test_explicit_layouts_padded_and_synthetic_dims():
    """A padded non-stick dim (100 rows tiled as 2 x 64) and a sparse stick (one element per stick)."""
    tiled = TensorLayout((100, 64), "fp16", (2, 64, 64), (64 * 64, 64, 1))
    sparse = TensorLayout((4,), "fp16", (4, 64), (1, -1))
    for layout in (tiled, sparse):
        host = _random(layout.shape, "fp16", seed=1)
        image = to_device(host, layout)
        assert np.array_equal(image, _reference_image(host, layout).reshape(-1).view(np.uint8))
        assert np.array_equal(from_device(image, layout).view(np.uint16), host.view(np.uint16))
    assert dim_map(sparse) == (0, -1)
    assert np.array_equal(to_device(np.arange(4, dtype=np.float16), sparse).view(np.float16)[::64], [0, 1, 2, 3])


def test_from_device_gives_the_numpy_dtype_of_the_element_format():
    expect = {"fp16": np.float16, "bf16": np.uint16, "fp32": np.float32, "int32": np.int32, "int8": np.int8,
              "fp8": np.uint8}
    for dtype, numpy_type in expect.items():
        layout = default_layout((3, 5), dtype)
        assert from_device(bytes(device_bytes(layout)), layout).dtype == numpy_type


def test_layout_from_json_lists_equals_the_default():
    layout = TensorLayout([5], "fp16", [1, 64], [5, 1])
    assert layout == default_layout((5,), "fp16")
    assert hash(layout) == hash(default_layout((5,), "fp16"))


@pytest.mark.parametrize(("layout", "message"), [
    (TensorLayout((5, 100, 150), "fp64", (100, 3, 5, 64), (150, 64, 15000, 1)), "unknown dtype 'fp64'"),
    (TensorLayout((5, 0), "fp16", (1, 5, 64), (64, 1, 1)), "has a dim smaller than 1"),
    (TensorLayout((5, 100, 150), "fp16", (100, 3, 5), (150, 64, 15000, 1)), "of equal length"),
    (TensorLayout((5, 100, 150), "fp16", (100, 0, 5, 64), (150, 64, 15000, 1)), "device_size [100, 0, 5, 64]"),
    (TensorLayout((5, 100, 150), "fp16", (100, 6, 5, 32), (150, 32, 15000, 1)), "one stick of 64 fp16"),
    (TensorLayout((5, 100, 150), "fp16", (100, 3, 5, 64), (150, 0, 15000, 1)), "neither positive nor -1"),
    (TensorLayout((5, 100, 150), "fp16", (100, 3, 5, 64), (151, 64, 15000, 1)), "device dim 0: stride 151"),
    (TensorLayout((5, 100, 150), "fp16", (100, 3, 64), (150, 64, 1)), "host dim 0 (size 5) is stepped by no"),
    (TensorLayout((5, 100, 150), "fp16", (100, 3, 5, 64), (150, 32, 15000, 1)), "by 32 elements where 64"),
    (TensorLayout((5, 100, 150), "fp16", (100, 2, 5, 64), (150, 64, 15000, 1)), "reach 128 of its 150"),
    (TensorLayout((5, 100, 150), "fp16", (50, 3, 5, 64), (150, 64, 15000, 1)), "reach 50 of its 100"),
])
def test_impossible_layouts_are_rejected_in_one_line(layout, message):
    with pytest.raises(ProgramError) as info:
        check_layout(layout, file="prog.json", path="tensors.x.layout")
    text = str(info.value)
    assert text.startswith("prog.json: tensors.x.layout: ")
    assert message in text
    assert "\n" not in text
    with pytest.raises(ProgramError):
        to_device(np.zeros(layout.shape, np.float16), layout)


@pytest.mark.parametrize(("shape", "dtype", "dim_order", "message"), [
    ((5, 100, 150), "fp16", [0, 0, 2], "dim_order [0, 0, 2] is not a permutation of the 3 host dims"),
    ((5, 100, 150), "fp16", [0, 1], "dim_order [0, 1] is not a permutation"),
    ((5, 100), "fp64", None, "unknown dtype 'fp64'"),
    ((5, -1), "fp16", None, "host shape [5, -1] has a dim smaller than 1"),
])
def test_default_layout_rejects_bad_requests(shape, dtype, dim_order, message):
    with pytest.raises(ProgramError, match=r"^prog\.json: tensors\.x: ") as info:
        default_layout(shape, dtype, dim_order, file="prog.json", path="tensors.x")
    assert message in str(info.value)


def test_conversions_reject_data_that_does_not_fit_the_layout():
    layout = default_layout((5, 100, 150), "fp16")
    with pytest.raises(SpyreEmuError, match=r"shape \[5, 100\], the layout \[5, 100, 150\]"):
        to_device(np.zeros((5, 100), np.float16), layout)
    with pytest.raises(SpyreEmuError, match="4 B elements, fp16 needs 2 B"):
        to_device(np.zeros((5, 100, 150), np.float32), layout)
    with pytest.raises(SpyreEmuError, match="device image has 128 B, the layout 192000 B"):
        from_device(bytes(128), layout)
