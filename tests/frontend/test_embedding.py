"""Embedding on the card: an ``embedding`` kernel reads the rows the (host) indices name."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402

pytestmark = pytest.mark.torch


def _table(rows, width):
    torch.manual_seed(0)
    return torch.nn.Embedding(rows, width).half()


@pytest.mark.parametrize(("rows", "width", "ids"), [
    (100, 96, [[5, 7, 99, 0, 5, 3, 42, 42]]),                 # repeats and the last row
    (256, 128, [[3, 1, 4, 1, 5, 9, 2, 6], [5, 3, 5, 8, 9, 7, 9, 3]]),  # a batch of two
])
def test_rows_on_the_card_match_eager(check, rows, width, ids):
    table = _table(rows, width)
    check(lambda i: table(i) * 2, torch.tensor(ids))
    rep = last_report()
    assert [k["op"] for k in rep.kernels][0] == "embedding"
    assert rep.fallbacks == []
    assert rep.crossings == []


def test_the_same_compiled_graph_reads_other_rows(check):
    """The timing is the graph's, the rows are each call's: a second call with other ids."""
    table = _table(50, 64)
    compiled = torch.compile(lambda i: table(i) + 1, backend="spyre_emu", dynamic=False)
    with torch.no_grad():
        for ids in ([[1, 2, 3, 4]], [[49, 0, 49, 7]]):
            i = torch.tensor(ids)
            torch.testing.assert_close(compiled(i).float(), table(i).float() + 1, atol=5e-3, rtol=5e-3)


def test_indices_a_cpu_fallback_computed_cross_to_the_card(check):
    """The cast of a float to int64 runs on the CPU; its result crosses PCIe as the embedding's indices
    (int32: 4 bytes an index), a priced round trip."""
    table = _table(20, 64)
    check(lambda x: table((x * 2).long()), torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float16))
    rep = last_report()
    assert any(k["op"] == "embedding" for k in rep.kernels)
    assert [(c["direction"], c["bytes"]) for c in rep.crossings if c["direction"] == "h2d"] == [("h2d", 12)]
