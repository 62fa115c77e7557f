"""Functional mode against numpy: every SFU op, PT passes, FIFOs, the ring, multi-core GEMM, softmax."""

import json

import numpy as np
import pytest

from spyre_emu.numerics import from_f32, to_card, to_f32, to_host
from spyre_emu.pipeline import load_program, run
from spyre_emu.unit_program.opcodes import SFU_OPS
from tests.conftest import ROOT, load_script, program

STICK = 128


def _run(tmp_path, machine, data, inputs):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(data))
    files = {}
    for name, array in inputs.items():
        files[name] = tmp_path / f"{name}.npy"
        np.save(files[name], array)
    return run(load_program(path, machine), machine, functional=True, inputs=files).outputs


def _buf(array, dtype="fp16", output=None):
    spec = {"bytes": array.nbytes, "dtype": dtype, "shape": list(array.shape)}
    return {**spec, "output": output} if output else spec


REFERENCE = {
    "copy": lambda x: x, "neg": lambda x: -x, "abs": np.abs, "relu": lambda x: np.maximum(x, 0),
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "max": np.maximum, "min": np.minimum,
    "div": np.divide, "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x),
    "reciprocal": lambda x: 1 / x, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.vectorize(__import__("math").erf)(x / np.sqrt(2))),
    "reduce_sum": lambda x: x.sum(0, keepdims=True), "reduce_max": lambda x: x.max(0, keepdims=True),
    "lanes_sum": lambda x: np.repeat(x.sum(1, keepdims=True), 64, 1),
    "lanes_max": lambda x: np.repeat(x.max(1, keepdims=True), 64, 1),
    "gt": np.greater, "ge": np.greater_equal, "lt": np.less, "le": np.less_equal, "eq": np.equal,
    "ne": np.not_equal, "where": lambda x, b, c: np.where(x != 0, b, c),
    "splat": lambda x: np.repeat(x[:, :1], 64, 1),
    "transpose": lambda x: x.reshape(-1, 64, 64).transpose(0, 2, 1).reshape(x.shape),
    "cos": np.cos, "sin": np.sin,
    "widen_lo": lambda x: x[:, :x.shape[1] // 2], "widen_hi": lambda x: x[:, x.shape[1] // 2:],
    "narrow": lambda a, b: np.concatenate([a, b], 1),
}
CASTS = {op for op, spec in SFU_OPS.items() if spec.shape in ("widen", "narrow")}


def test_reference_covers_every_sfu_op():
    assert set(REFERENCE) == set(SFU_OPS)


@pytest.mark.parametrize("op", sorted(set(SFU_OPS) - CASTS))
def test_sfu_op_matches_numpy(tmp_path, tiny, op):
    spec = SFU_OPS[op]
    n = 64 if spec.shape == "block" else 5
    rng = np.random.default_rng(1)
    x = rng.uniform(0.1, 2.0, (n, 64))
    if op not in ("log", "sqrt", "rsqrt"):
        x *= np.sign(rng.standard_normal((n, 64)))
    x[:, ::3] = 0 if op in ("where", "eq", "ne") else x[:, ::3]
    x = x.astype(np.float16)
    b = rng.uniform(0.5, 2.0, (n, 64)).astype(np.float16)
    b[:, ::3] = x[:, ::3] if op in ("eq", "ne", "ge", "le") else b[:, ::3]
    c = rng.uniform(-2.0, -0.5, (n, 64)).astype(np.float16)
    out_sticks = 1 if spec.shape == "sticks" else n
    ins = {"op": op, "a": 0, "out": 24576, "sticks": n, "wait": ["in"], "signal": ["done"]}
    ins |= {field: 8192 * i for i, field in enumerate(("a", "b", "c")[:spec.arity])}
    loads = [{"op": "load", "dram": name, "lx": 8192 * i, "bytes": n * STICK} for i, name in enumerate("xbc")]
    loads[-1]["signal"] = ["in"]
    store = [{"op": "store", "lx": 24576, "dram": "y", "bytes": out_sticks * STICK, "wait": ["done"]}]
    y = np.zeros((out_sticks, 64), np.float16)
    data = program({0: {"load": loads, "sfu0": [ins], "store": store}},
                   {"x": _buf(x), "b": _buf(b), "c": _buf(c), "y": _buf(y, output="y.npy")})
    got = _run(tmp_path, tiny, data, {"x": x, "b": b, "c": c})["y"]
    operands = [v.astype(np.float32) for v in (x, b, c)[:spec.arity]]
    want = np.asarray(REFERENCE[op](*operands), np.float32).astype(np.float16)
    np.testing.assert_allclose(got.astype(np.float32), want.astype(np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("narrow_to", ["fp16", "bf16"])
def test_casts_are_exact_as_numpy_astype(tmp_path, tiny, narrow_to):
    """fp16 -> fp32 (widen_lo, widen_hi: each input stick's halves) is exact for what the card holds
    (x as DLFloat16); fp32 -> fp16 or bf16 (narrow: two sticks into one) rounds as numerics does:
    DLFloat16 ties away from zero, bf16 to nearest even."""
    n, rng = 3, np.random.default_rng(2)
    x = (rng.standard_normal((n, 64)) * 100).astype(np.float16)
    w = (rng.standard_normal((2 * n, 32)) * 100).astype(np.float32)
    lo = {"op": "widen_lo", "a": 0, "out": 8192, "sticks": n, "out_dtype": "fp32", "wait": ["in"]}
    hi = {"op": "widen_hi", "a": 0, "out": 8192 + n * STICK, "sticks": n, "out_dtype": "fp32"}
    pair = {"op": "narrow", "a": 4096, "b": 4096 + n * STICK, "out": 16384, "sticks": n, "dtype": "fp32",
            "out_dtype": narrow_to, "signal": ["done"]}
    loads = [{"op": "load", "dram": "x", "lx": 0, "bytes": n * STICK},
             {"op": "load", "dram": "w", "lx": 4096, "bytes": 2 * n * STICK, "signal": ["in"]}]
    store = [{"op": "store", "lx": 8192, "dram": "y", "bytes": 2 * n * STICK, "wait": ["done"]},
             {"op": "store", "lx": 16384, "dram": "z", "bytes": n * STICK}]
    z = np.zeros((n, 64), np.float16 if narrow_to == "fp16" else np.uint16)
    data = program({0: {"load": loads, "sfu0": [lo, hi, pair], "store": store}},
                   {"x": _buf(x), "w": _buf(w, "fp32"), "y": _buf(np.zeros((2 * n, 32), np.float32), "fp32", "y.npy"),
                    "z": _buf(z, narrow_to, "z.npy")})
    out = _run(tmp_path, tiny, data, {"x": x, "w": w})
    held = to_f32(from_f32(x, "fp16"), "fp16").reshape(x.shape)
    np.testing.assert_array_equal(out["y"], np.concatenate([held[:, :32], held[:, 32:]]))
    want = np.concatenate([w[:n], w[n:]], 1)
    np.testing.assert_array_equal(to_card(out["z"], narrow_to).reshape(-1).view(np.uint8),
                                  from_f32(want.reshape(-1), narrow_to))


def test_broadcast_operand(tmp_path, tiny):
    x = np.arange(3 * 64, dtype=np.float16).reshape(3, 64) / 64
    b = np.full((1, 64), 0.5, np.float16)
    ins = {"op": "mul", "a": 0, "b": 4096, "b_broadcast": True, "out": 8192, "sticks": 3, "wait": ["in"],
           "signal": ["done"]}
    loads = [{"op": "load", "dram": "x", "lx": 0, "bytes": 3 * STICK},
             {"op": "load", "dram": "b", "lx": 4096, "bytes": STICK, "signal": ["in"]}]
    store = [{"op": "store", "lx": 8192, "dram": "y", "bytes": 3 * STICK, "wait": ["done"]}]
    data = program({0: {"load": loads, "sfu1": [ins], "store": store}},
                   {"x": _buf(x), "b": _buf(b), "y": _buf(x, output="y.npy")})
    np.testing.assert_array_equal(_run(tmp_path, tiny, data, {"x": x, "b": b})["y"], x * np.float16(0.5))


def test_broadcast_first_and_third_operands(tmp_path, tiny):
    """a_broadcast and c_broadcast read one stick for every output stick, as b_broadcast does."""
    x = np.arange(3 * 64, dtype=np.float16).reshape(3, 64) / 64
    cond = np.tile(np.arange(64) % 2, (3, 1)).astype(np.float16)
    one = np.ones((1, 64), np.float16)
    sub = {"op": "sub", "a": 8192, "a_broadcast": True, "b": 0, "out": 12288, "sticks": 3, "wait": ["in"]}
    where = {"op": "where", "a": 4096, "b": 12288, "c": 8192, "c_broadcast": True, "out": 16384, "sticks": 3,
             "signal": ["done"]}
    loads = [{"op": "load", "dram": "x", "lx": 0, "bytes": 3 * STICK},
             {"op": "load", "dram": "cond", "lx": 4096, "bytes": 3 * STICK},
             {"op": "load", "dram": "one", "lx": 8192, "bytes": STICK, "signal": ["in"]}]
    store = [{"op": "store", "lx": 16384, "dram": "y", "bytes": 3 * STICK, "wait": ["done"]}]
    data = program({0: {"load": loads, "sfu0": [sub, where], "store": store}},
                   {"x": _buf(x), "cond": _buf(cond), "one": _buf(one), "y": _buf(x, output="y.npy")})
    got = _run(tmp_path, tiny, data, {"x": x, "cond": cond, "one": one})["y"]
    np.testing.assert_array_equal(got, np.where(cond != 0, 1 - x, np.float16(1)))


def test_splatted_operand_reads_lane_0_in_every_lane(tmp_path, tiny):
    """b_splat: each stick of b is read with its lane 0 in all 64 lanes (the other lanes are ignored);
    with b_broadcast too, one such stick serves every output stick."""
    x = np.arange(3 * 64, dtype=np.float16).reshape(3, 64) / 64
    b = (np.arange(3 * 64, dtype=np.float16).reshape(3, 64) + 1) / 256
    rows = {"op": "sub", "a": 0, "b": 4096, "b_splat": True, "out": 8192, "sticks": 3, "wait": ["in"]}
    one = {"op": "sub", "a": 8192, "b": 4096 + STICK, "b_splat": True, "b_broadcast": True, "out": 12288,
           "sticks": 3, "signal": ["done"]}
    loads = [{"op": "load", "dram": "x", "lx": 0, "bytes": 3 * STICK},
             {"op": "load", "dram": "b", "lx": 4096, "bytes": 3 * STICK, "signal": ["in"]}]
    store = [{"op": "store", "lx": 12288, "dram": "y", "bytes": 3 * STICK, "wait": ["done"]}]
    data = program({0: {"load": loads, "sfu0": [rows, one], "store": store}},
                   {"x": _buf(x), "b": _buf(b), "y": _buf(x, output="y.npy")})
    got = _run(tmp_path, tiny, data, {"x": x, "b": b})["y"]
    np.testing.assert_array_equal(got, (x - b[:, :1]) - b[1, 0])


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("repeat", [False, True], ids=["two", "repeat"])
def test_matmul_passes_accumulate_in_lx(tmp_path, tiny, dtype, repeat):
    """Two PT passes over K halves; the second accumulates into the first's output. As one instruction
    (``repeat`` 2, A and B moved on by a half each), both accumulate into LX's zeros."""
    rng = np.random.default_rng(2)
    k = 256
    a = rng.standard_normal((8, k)).astype(np.float32)
    b = rng.standard_normal((k, 64)).astype(np.float32)
    a_dev, b_dev = _to_device(a, dtype), _to_device(b, dtype)
    half = k // 2
    # A rows hold each half contiguously: [2 halves][8 rows][half]; B is k sticks of 64 columns.
    a_tiled = np.concatenate([a_dev.reshape(8, 2, -1)[:, h].reshape(-1) for h in range(2)])
    passes = [{"op": "matmul", "a": h * 8 * half * 2, "b": 65536 + h * half * STICK, "c": 131072, "rows": 8,
               "k": half, "dtype": dtype, "accumulate": h == 1} for h in range(2)]
    if repeat:
        passes = [{**passes[0], "accumulate": True, "repeat": 2, "a_step": passes[1]["a"], "b_step": half * STICK}]
    passes[0]["wait"], passes[-1]["signal"] = ["in"], ["done"]
    loads = [{"op": "load", "dram": "a", "lx": 0, "bytes": a_tiled.nbytes},
             {"op": "load", "dram": "b", "lx": 65536, "bytes": b_dev.nbytes, "signal": ["in"]}]
    store = [{"op": "store", "lx": 131072, "dram": "c", "bytes": 8 * STICK, "wait": ["done"]}]
    c = np.zeros((8, 64), np.float16)
    data = program({0: {"load": loads, "pt1": passes, "store": store}},
                   {"a": {"bytes": a_tiled.nbytes, "dtype": "int8"}, "b": {"bytes": b_dev.nbytes, "dtype": "int8"},
                    "c": _buf(c, output="c.npy")})
    got = _run(tmp_path, tiny, data, {"a": a_tiled.view(np.int8), "b": b_dev.view(np.int8)})["c"]
    want = _from_device(a_dev, dtype, a.shape) @ _from_device(b_dev, dtype, b.shape)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=2e-2)


def _to_device(x, dtype):
    return from_f32(x.reshape(-1), dtype)


def _from_device(raw, dtype, shape):
    return to_f32(raw, dtype).reshape(shape)


def test_fifo_stream_through_sfu(tmp_path, tiny):
    x = np.linspace(-2, 2, 6 * 64).astype(np.float16).reshape(6, 64)
    units = {"load": [{"op": "load", "dram": "x", "lx": 0, "bytes": 6 * STICK, "signal": ["in"]}],
             "lx2fifo0": [{"op": "lx2fifo", "lx": 0, "bytes": 6 * STICK, "wait": ["in"]}],
             "sfu0": [{"op": "relu", "a": "fifo", "out": "fifo", "sticks": 6}],
             "fifo2lx0": [{"op": "fifo2lx", "lx": 4096, "bytes": 6 * STICK, "signal": ["done"]}],
             "store": [{"op": "store", "lx": 4096, "dram": "y", "bytes": 6 * STICK, "wait": ["done"]}]}
    data = program({0: units}, {"x": _buf(x), "y": _buf(x, output="y.npy")})
    held = to_host(to_card(x, "fp16"), "fp16")  # linspace's steps need more than DLFloat16's 9 fraction bits
    np.testing.assert_array_equal(_run(tmp_path, tiny, data, {"x": x})["y"], np.maximum(held, 0))


def test_ring_send_moves_bytes(tmp_path, tiny):
    x = np.arange(4 * 64, dtype=np.float16).reshape(4, 64)
    cores = {0: {"load": [{"op": "load", "dram": "x", "lx": 0, "bytes": 4 * STICK, "signal": ["in"]}],
                 "send": [{"op": "send", "lx": 0, "to_core": 3, "to_lx": 512, "bytes": 4 * STICK, "wait": ["in"],
                           "signal": ["sent"]}]},
             3: {"store": [{"op": "store", "lx": 512, "dram": "y", "bytes": 4 * STICK, "wait": ["sent"]}]}}
    data = program(cores, {"x": _buf(x), "y": _buf(x, output="y.npy")})
    np.testing.assert_array_equal(_run(tmp_path, tiny, data, {"x": x})["y"], x)


def test_strided_and_multicast_loads_move_bytes(tmp_path, tiny):
    """Rows 0, 2, 4, 6 of x by one strided load into cores 1 and 2, each stored back strided into y's
    odd rows; y's even rows stay zero."""
    x = np.arange(8 * 64, dtype=np.float16).reshape(8, 64)
    strided = {"bytes": 4 * STICK, "piece": STICK, "stride": 2 * STICK}
    cores = {0: {"load": [{"op": "load", "dram": "x", "lx": 0, "to": [1, 2], **strided, "signal": ["a", "b"]}]},
             1: {"store": [{"op": "store", "lx": 0, "dram": f"y+{STICK}", **strided, "wait": ["a"]}]},
             2: {"store": [{"op": "store", "lx": 0, "dram": f"z+{STICK}", **strided, "wait": ["b"]}]}}
    data = program(cores, {"x": _buf(x), "y": _buf(x, output="y.npy"), "z": _buf(x, output="z.npy")})
    out = _run(tmp_path, tiny, data, {"x": x})
    want = np.zeros_like(x)
    want[1::2] = x[0::2]
    np.testing.assert_array_equal(out["y"], want)
    np.testing.assert_array_equal(out["z"], want)


def test_an_lx_pattern_places_and_gathers_sticks(tmp_path, tiny):
    """x's 8 rows loaded whole into every second LX slot (lx_piece one stick, lx_stride two), then stored
    whole from LX slots 2..9 with two-stick pieces four slots apart: rows 1, 5 | 2, 6 | 3, 7 | 4, 8 of the
    loaded sticks are slots 2-3, 6-7, 10-11, 14-15, i.e. x rows 1, 3, 5, 7 each followed by a zero slot."""
    x = np.arange(8 * 64, dtype=np.float16).reshape(8, 64) + 1
    cores = {0: {"load": [{"op": "load", "dram": "x", "lx": 0, "bytes": 8 * STICK, "lx_piece": STICK,
                           "lx_stride": 2 * STICK, "signal": ["a"]}],
                 "store": [{"op": "store", "lx": 2 * STICK, "dram": "y", "bytes": 8 * STICK, "lx_piece": 2 * STICK,
                            "lx_stride": 4 * STICK, "wait": ["a"]}]}}
    data = program(cores, {"x": _buf(x), "y": _buf(x, output="y.npy")})
    want = np.zeros_like(x)
    want[0::2] = x[1::2]
    np.testing.assert_array_equal(_run(tmp_path, tiny, data, {"x": x})["y"], want)


def _examples_module():
    return load_script(ROOT / "examples" / "make_programs.py")


def test_gemm_over_32_cores_matches_numpy(tmp_path, spyre):
    """The example GEMM generator at a small size: (m=4, n=8) blocks, K in two chunks."""
    m, k, n, sm, sn, kc = 128, 256, 512, 4, 8, 128
    rng = np.random.default_rng(3)
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    mb = m // sm
    a_dev = a.reshape(sm, mb, k // kc, kc).transpose(0, 2, 1, 3).copy()   # [M/mb][K/kc][mb][kc]
    b_dev = b.reshape(k, n // 64, 64).transpose(1, 0, 2).copy()           # [N/64][K][64]
    data = _examples_module().gemm(m, k, n, sm, sn, kc)
    data["buffers"]["A"].update({"dtype": "fp16", "shape": list(a_dev.shape)})
    data["buffers"]["B"].update({"dtype": "fp16", "shape": list(b_dev.shape)})
    data["buffers"]["C"].update({"dtype": "fp16", "shape": [n // 64, m, 64], "output": "c.npy"})
    got = _run(tmp_path, spyre, data, {"A": a_dev, "B": b_dev})["C"]
    want = (a.astype(np.float32) @ b.astype(np.float32)).reshape(m, n // 64, 64).transpose(1, 0, 2)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-2, atol=5e-2)


def test_softmax_example_matches_numpy(tmp_path, spyre):
    path = ROOT / "examples" / "programs" / "softmax_1core.json"
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 1024)).astype(np.float16)
    np.save(tmp_path / "x.npy", x)
    got = run(load_program(path, spyre), spyre, functional=True, inputs={"x": tmp_path / "x.npy"}).outputs["y"]
    x32 = x.astype(np.float32)
    want = np.exp(x32 - x32.max(1, keepdims=True))
    want /= want.sum(1, keepdims=True)
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=1e-2, atol=1e-3)
