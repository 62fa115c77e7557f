"""The copies IBM's serving stack made in a Granite-3.3-8B step (benchmarks/host_launch.py, ``ibm_copies``),
by hand from Granite's shape: hidden 4096, 8 KV heads of 128, FFN 12800; fp16."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from tests.conftest import ROOT, load_script  # noqa: E402

HOST_LAUNCH = load_script(ROOT / "benchmarks" / "host_launch.py")


def _sizes(copies) -> list[tuple[str, int]]:
    return [(c.direction, c.nbytes) for c in copies]


def test_a_decode_layer_moves_its_attention_and_its_host_slices():
    """One token over 1,024 cached keys: QKV out (4096 + 2 x 1024 values); queries in, padded to 32 rows;
    keys and values in over the whole context, 1,025 padded to 1,280; the mask (8 heads x 32 x 1,280);
    the attention's 32 rows out; one row in for the output projection; gate and up out (2 x 12,800),
    each half in."""
    step, layer = HOST_LAUNCH.ibm_copies("decode")
    assert _sizes(step) == [("h2d", 8), ("d2h", 2 * 49155)]
    assert _sizes(layer) == [("d2h", 12_288), ("h2d", 262_144), ("h2d", 2_621_440), ("h2d", 2_621_440),
                             ("h2d", 655_360), ("d2h", 262_144), ("h2d", 8_192),
                             ("d2h", 51_200), ("h2d", 25_600), ("h2d", 25_600)]


def test_a_prefill_layer_scales_with_its_1024_tokens():
    """1,024 tokens, no cache: 1,024 rows everywhere (already a multiple of 32 and of 256)."""
    _, layer = HOST_LAUNCH.ibm_copies("prefill")
    t = 1024
    assert _sizes(layer) == [("d2h", 2 * t * 6144), ("h2d", 2 * t * 4096), ("h2d", 2 * t * 1024),
                             ("h2d", 2 * t * 1024), ("h2d", 2 * 8 * t * t), ("d2h", 2 * t * 4096),
                             ("h2d", 2 * t * 4096), ("d2h", 4 * t * 12800), ("h2d", 2 * t * 12800),
                             ("h2d", 2 * t * 12800)]


def test_each_layers_copies_follow_its_launches():
    """Four launches of two layers: ids in first, each layer's ten copies after its two launches, logits
    out last."""
    launches = [HOST_LAUNCH.Launch(f"k{i}", 1.0) for i in range(4)]
    ops = HOST_LAUNCH.with_ibm_copies(launches, "decode", 2)
    kinds = ["L" if isinstance(op, HOST_LAUNCH.Launch) else op.direction for op in ops]
    layer = [c.direction for c in HOST_LAUNCH.ibm_copies("decode")[1]]
    assert kinds == ["h2d", "L", "L", *layer, "L", "L", *layer, "d2h"]
