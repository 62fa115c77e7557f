"""patches: a channels-last image's windows as rows (convolution and pooling on the card), against numpy."""

import json

import numpy as np
import pytest

from spyre_emu import reference
from spyre_emu.engine import simulate
from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import load, run
from tests.conftest import card_fp16


def _reference(x, k, s, p, d, pad):
    n, h, w, c = x.shape
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    xp = np.full((n, h + 2 * p[0], w + 2 * p[1], c), pad, x.dtype)
    xp[:, p[0]:p[0] + h, p[1]:p[1] + w] = x
    rows = [xp[:, i * d[0]:i * d[0] + (oh - 1) * s[0] + 1:s[0], j * d[1]:j * d[1] + (ow - 1) * s[1] + 1:s[1]]
            for i in range(k[0]) for j in range(k[1])]
    return np.stack(rows, axis=3).reshape(n * oh * ow, k[0] * k[1], c)


def _program(tmp_path, shape, k, s, p, d=(1, 1), pad=0.0, flat=False, slices=1):
    x = card_fp16(np.random.default_rng(4).standard_normal(shape)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    want = _reference(x, k, s, p, d, np.float16(pad))
    out = [want.shape[0], want.shape[1] * want.shape[2]] if flat else list(want.shape)
    dims = {f"d{i}": m for i, m in enumerate(out)}
    data = {"format": "spyre-emu.kernel-program", "version": 1,
            "tensors": {"x": {"shape": list(shape), "dtype": "fp16", "role": "input", "data": "x.npy"},
                        "y": {"shape": out, "dtype": "fp16", "role": "output"}},
            "kernels": [{"op": "patches", "inputs": ["x"], "outputs": ["y"], "dims": dims,
                         "work_division": {"d0": slices},
                         "attrs": {"image": list(shape[:3]), "kernel": list(k), "stride": list(s), "padding": list(p),
                                   "dilation": list(d), "pad": pad}}]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    return path, want.reshape(out)


@pytest.mark.parametrize(("shape", "k", "s", "p", "d", "pad", "flat", "slices"), [
    ((1, 8, 8, 64), (3, 3), (1, 1), (1, 1), (1, 1), 0.0, True, 4),        # a ResNet 3x3 convolution
    ((2, 8, 8, 128), (3, 3), (2, 2), (1, 1), (1, 1), 0.0, True, 2),       # strided, a batch of two
    ((1, 16, 16, 64), (3, 3), (2, 2), (1, 1), (1, 1), -32768.0, False, 8),  # ResNet's max pool windows
    ((1, 7, 9, 64), (2, 3), (1, 2), (0, 2), (2, 1), 1.5, False, 1),       # uneven sizes, dilation
    ((1, 4, 4, 64), (1, 1), (2, 2), (0, 0), (1, 1), 0.0, True, 1),        # a 1x1 downsampling convolution
])
def test_windows_match_numpy(tmp_path, spyre, shape, k, s, p, d, pad, flat, slices):
    path, want = _program(tmp_path, shape, k, s, p, d, pad, flat, slices)
    program = load(path, spyre)
    assert not [i for i in program.units.instructions() if i.unit.startswith(("sfu", "pt"))]  # DMA only
    np.testing.assert_array_equal(run(program, spyre, functional=True).outputs["y"], want)


def test_engine_and_reference_agree(tmp_path, spyre):
    path, _ = _program(tmp_path, (1, 8, 8, 64), (3, 3), (2, 2), (1, 1), slices=4)
    units = load(path, spyre).units
    log, ref = simulate(units, spyre), reference.simulate(units, spyre)
    assert log.start.tolist() == list(ref.start)
    assert log.end.tolist() == list(ref.end)


def test_any_shapes_ending_in_the_channels(tmp_path, spyre):
    """x as (N·H·W, C) and y as (rows, KK, 1, C): the same elements, the same windows."""
    path, want = _program(tmp_path, (1, 8, 8, 64), (3, 3), (2, 2), (1, 1))
    data = json.loads(path.read_text())
    x = np.load(tmp_path / "x.npy")
    np.save(tmp_path / "x.npy", x.reshape(64, 64))
    data["tensors"]["x"]["shape"] = [64, 64]
    data["tensors"]["y"]["shape"] = [16, 9, 1, 64]
    data["kernels"][0]["dims"] = {"d0": 16, "d1": 9, "mb": 1, "out": 64}
    path.write_text(json.dumps(data))
    got = run(load(path, spyre), spyre, functional=True).outputs["y"]
    np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_channels_must_be_whole_sticks(tmp_path, spyre):
    path, _ = _program(tmp_path, (1, 8, 8, 64), (3, 3), (1, 1), (1, 1))
    data = json.loads(path.read_text())
    data["tensors"]["x"]["shape"] = [1, 8, 8, 3]
    data["kernels"][0]["attrs"]["image"] = [1, 8, 8]
    path.write_text(json.dumps(data))
    with pytest.raises(ProgramError, match="C whole sticks"):
        load(path, spyre)
