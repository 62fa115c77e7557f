"""A Llama-3.1-8B decoder layer at real dims, timing only on meta tensors (no weights allocated).

Minutes of wall time on a 2-core machine, so it runs only with SPYRE_EMU_LARGE=1; docs/frontend.md
records the measured latencies.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

from tests.frontend import models  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.skipif(not os.environ.get("SPYRE_EMU_LARGE"),
                                                    reason="minutes long: set SPYRE_EMU_LARGE=1")]
DIM, HEADS, KV_HEADS, FFN = 4096, 32, 8, 14336


@pytest.mark.parametrize(("seq", "cache"), [(512, 0), (1, 2048)], ids=["prefill_512", "decode_kv2048"])
def test_llama_8b_layer_timing_only(seq, cache):
    with torch.device("meta"):
        layer = models.LlamaLayer(DIM, HEADS, KV_HEADS, FFN).half().eval()
        x = torch.empty(1, seq, DIM, dtype=torch.float16)
        cos, sin = models.rope(seq, DIM // HEADS, device="meta")
        kv = [torch.empty(1, KV_HEADS, cache, DIM // HEADS, dtype=torch.float16)] * 2 if cache else []
    with torch.no_grad():
        out, _, _ = torch.compile(layer, backend="spyre_emu", dynamic=False)(x, cos, sin, *kv)
    assert out.is_meta
    assert out.shape == (1, seq, DIM)
    rep = last_report()
    assert rep.fallbacks == []
    assert rep.crossings == []  # every view restickifies on the card
    assert rep.total_cycles > 0
    print(rep.to_text())
