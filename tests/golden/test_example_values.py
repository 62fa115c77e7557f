"""The example kernel programs compute what their notes say (functional runs against numpy)."""

import json
import math

import numpy as np
import pytest

from spyre_emu.pipeline import load, run
from tests.conftest import ROOT

EXAMPLES = ROOT / "examples" / "programs"


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _layernorm(h, w, b):
    return (h - h.mean(-1, keepdims=True)) / np.sqrt(h.var(-1, keepdims=True) + 1e-5) * w + b


def _gelu(h):
    return 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))


REFERENCE = {
    "add_exp_kernels": lambda t: np.exp(t["a"] + t["b"]),
    "softmax_lx_kernels": lambda t: _softmax(t["x"]),
    "layernorm_residual_kernels": lambda t: _layernorm(t["x"] + t["r"], t["w"], t["b"]),
    "mlp_gelu_kernels": lambda t: _gelu(t["x"] @ t["w"] + t["bias"]),
    "row_sum_split_kernels": lambda t: t["x"].sum(-1, keepdims=True),
    "restickify_kernels": lambda t: t["x"],
    "cat_kernels": lambda t: np.concatenate([t["past"], t["new"]], 1),
    "bmm_kernels": lambda t: t["x"] @ t["w"],
    "attention_tile_kernels": lambda t: _softmax(t["q"] @ t["kt"] + t["mask"]) @ t["v"],
}
SCALE = {"mlp_gelu_kernels": {"x": 0.05, "w": 0.05}, "bmm_kernels": {"x": 0.05},  # keeps the products in fp16's range
         "attention_tile_kernels": {"q": 0.1}}


def test_every_example_kernel_program_has_a_reference():
    found = {p.stem for p in EXAMPLES.glob("*.json") if json.loads(p.read_text())["format"].endswith("kernel-program")}
    assert found == set(REFERENCE)


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_example_matches_numpy(spyre, name):
    program = load(EXAMPLES / f"{name}.json", spyre)
    rng = np.random.default_rng(0)
    inputs = {n: (rng.standard_normal(t.layout.shape) * SCALE.get(name, {}).get(n, 1)).astype(np.float16)
              for n, t in program.tensors.items() if t.role in ("input", "constant")}
    got = run(program, spyre, functional=True, inputs=inputs).outputs["y"].astype(np.float32)
    want = REFERENCE[name]({n: a.astype(np.float32) for n, a in inputs.items()})
    tol = 0.02 * math.sqrt(inputs["x"].shape[-1]) if name == "row_sum_split_kernels" else 2e-2
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=tol)
