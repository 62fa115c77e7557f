"""Attention whose scores do not fit in LX runs as tiles of its query rows, each tile one fused launch
(frontend/query_tiles.py), joined by a cat kernel."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from spyre_emu.frontend import compile as compile_module  # noqa: E402
from spyre_emu.frontend import last_report, work_division  # noqa: E402
from spyre_emu.frontend import query_tiles as query_tiles_module  # noqa: E402

from spyre_emu import pipeline  # noqa: E402
from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.lowering import usable_lx_sticks  # noqa: E402
from tests.frontend.conftest import assert_matches  # noqa: E402
from tests.reference.test_differential import assert_agree  # noqa: E402

pytestmark = pytest.mark.torch

CHAIN = ["batchmatmul", "mul", "softmax", "batchmatmul"]
MASKED = ["batchmatmul", "mul", "add", "softmax", "batchmatmul"]


def _compile(fn, *args, cores=4, cache=True):
    with torch.no_grad():
        got = torch.compile(fn, backend="spyre_emu", dynamic=False, options={"cores": cores, "cache": cache})(*args)
        want = fn(*(a.float() for a in args))
    assert_matches(got, want)
    return [[k["op"] for k in p["kernels"]] for p in last_report().kernel_programs]


def _qkv(heads, length, seed=5):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(1, heads, length, 64, generator=g).half() for _ in range(3)]


def _launches(fn, *shapes, cores=1):
    """The launches of ``fn`` on meta tensors of ``shapes`` (timing only)."""
    with torch.no_grad():
        torch.compile(fn, backend="spyre_emu", dynamic=False, options={"cores": cores})(
            *(torch.empty(s, dtype=torch.float16, device="meta") for s in shapes))
    return [[k["op"] for k in p["kernels"]] for p in last_report().kernel_programs]


def _tiles(ops, chain):
    """The number of fused tile launches, checking the launches are windows of Q, tiles and one cat."""
    assert ops[-1] == ["cat"]
    assert all(op in (["ReStickifyOpHBM"], chain) for op in ops[:-1]), ops
    return ops.count(chain)


def _fused(ops):
    """The launches that run a whole attention chain (Q·Kᵀ to P·V)."""
    return len([p for p in ops if p.count("batchmatmul") == 2 and "softmax" in p])


def test_attention_is_tiled_exactly_when_one_tile_s_scores_do_not_fit():
    """4 cores, heads of 512 × 512 fp16 scores: 8 sticks a row, so a head's scores are 4,096 sticks, 1,024 a core
    when split over 4. The scale and softmax write over the scores (one tensor live), which must fit in half the
    usable LX: 6,348 sticks. 6 heads take 6,144 a core (24,576 over 4 cores): one launch. 7 heads (7 is prime: 7
    heads × 128 rows a core) take 7,168: two tiles of 256 query rows, 3,584 each."""
    assert usable_lx_sticks(load_machine()) // 2 == 6348
    assert _compile(F.scaled_dot_product_attention, *_qkv(6, 512)) == [CHAIN]
    assert _tiles(_compile(F.scaled_dot_product_attention, *_qkv(7, 512)), CHAIN) == 2


def test_causal_grouped_query_attention_in_three_tiles_gives_torchs_values():
    """16 query heads (4 key/value heads, repeated for prefill as Granite's are) on 4 cores: 8 sticks a row, 16,384
    score sticks a core, 8,192 in two tiles; three tiles of 168, 168 and 176 rows (21, 21 and 22 PT passes) give a
    core a quarter of 16 × 176 × 8, 5,632 at most. The causal mask (a folded constant) is read through each
    tile's window of its rows."""
    def causal(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    q, k, v = _qkv(16, 512)
    ops = _compile(causal, q, k[:, :4], v[:, :4])
    assert _fused(ops) == 3  # V's restickify runs in the first tile's launch
    assert ops[-1] == ["cat"]


def test_a_mask_of_rows_and_a_key_padding_mask_in_tiles_give_torchs_values():
    """An additive mask computed on the card and varying along the rows is windowed with Q; a key-padding mask
    (one row, broadcast) is read whole by every tile."""
    def rows_mask(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m * 2)

    q, k, v = _qkv(8, 512, seed=6)
    mask = torch.randn(1, 1, 512, 512, generator=torch.Generator().manual_seed(7)).half()
    ops = _compile(rows_mask, q, k, v, mask)
    assert _fused(ops) == 2  # the mask's windows restickified inside the tiles' launches
    padding = torch.zeros(1, 1, 1, 512).half()
    padding[..., 300:] = float("-inf")
    assert _tiles(_compile(F.scaled_dot_product_attention, q, k, v, padding), MASKED) == 2


def test_a_prime_length_is_tiled_unevenly_and_gives_torchs_values():
    """257 query rows (prime: no equal tiles) of 8 heads on one core: 5 sticks a row, 10,280 score sticks, more
    than the 6,348 that fit; two tiles of 128 and 129 rows (5,160 sticks) fit. Only tile counts dividing the rows
    were tried before, so it ran as four launches with the scores through DRAM (2,481.3 µs; tiled, 997.2 µs; 256
    rows: 853.2 µs). A key-padding mask (one row) is read whole by both tiles."""
    q, k, v = _qkv(8, 257, seed=8)
    assert _tiles(_compile(F.scaled_dot_product_attention, q, k, v, cores=1), CHAIN) == 2
    padding = torch.zeros(1, 1, 1, 257).half()
    padding[..., 190:] = float("-inf")
    assert _tiles(_compile(F.scaled_dot_product_attention, q, k, v, padding, cores=1), MASKED) == 2


def test_causal_grouped_query_attention_at_a_prime_length_gives_torchs_values():
    """509 rows (prime), 16 query heads over 4 key/value heads, on 4 cores: 8 sticks a row, so a tile of r rows
    has 16 × r × 8 score sticks, and a split over 4 cores leaves a core at least a quarter of them, 32 r: two tiles
    (256 and 253 rows: 8,192 sticks) cannot fit in 6,348, three (168, 168 and 173 rows, a core 4 heads of them:
    at most 5,536) do. The causal mask is read through each tile's window of its rows, the last one's not whole
    PT passes."""
    def causal(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    q, k, v = _qkv(16, 509, seed=9)
    ops = _compile(causal, q, k[:, :4], v[:, :4])
    assert _fused(ops) == 3
    assert ops[-1] == ["cat"]


def test_the_tile_count_at_the_fit_limit():
    """One core, 8 heads, 5 sticks a row (257 to 320 keys): a tile of r rows takes 40 r score sticks, which fit when
    r <= 158 (6,348 // 40). Tiles are whole PT passes of 8 rows but the last, the passes shared near-equally
    (work_division.tile_rows): 307 rows (prime, 39 passes) in two tiles are 152 and 155 rows, which fit; 311
    (prime, 39 passes) are 152 and 159, which do not (6,360 sticks), so three of 104, 104 and 103. A tile is two
    launches (its window of Q, its chain), the cat one more."""
    for rows, tiles in ((307, 2), (311, 3)):
        ops = _launches(F.scaled_dot_product_attention, *[(1, 8, rows, 64)] * 3)
        assert _tiles(ops, CHAIN) == tiles
        assert len(ops) == 2 * tiles + 1


def test_a_tile_the_lowering_refuses_runs_its_unfused_chain_on_the_card(monkeypatch):
    """Each tile's fused softmax keeps the chain it was fused from: the lowering made to refuse the second tile's
    softmax, that tile runs max, exp, sum and the division on the card, as an untiled softmax would, and the
    values are torch's. A tile's kernel without its chain fell back to the CPU."""
    lower = compile_module._lower

    def refusing(seg, *args):
        refused = next((k for k in seg.kernels if k.op == "softmax" and k.name.endswith("_q1")), None)
        return (refused, "refused by the test") if refused else lower(seg, *args)

    monkeypatch.setattr(compile_module, "_lower", refusing)
    ops = _compile(F.scaled_dot_product_attention, *_qkv(8, 257, seed=10), cores=1, cache=False)
    assert not last_report().fallbacks
    assert sum(p.count("softmax") for p in ops) == 1
    assert sum(p.count("exp") for p in ops) == 1
    assert ops[-1] == ["cat"]


@pytest.mark.parametrize("length", [256, 257])
def test_the_reference_simulator_times_a_tiled_attention_alike(length):
    """Every launch of two tiles (the windows of Q, the fused tiles, the cat) times the same in the engine and the
    simpy reference: equal tiles of 128 rows, and 128 and 129 rows joined by a cat of unequal parts."""
    machine = load_machine()
    _compile(F.scaled_dot_product_attention, *_qkv(8, length), cores=1)
    programs = last_report().kernel_programs
    assert len(programs) == 5
    for i, program in enumerate(programs):
        assert_agree(pipeline.parse(program, machine, f"tile{i}").units, machine)


def _heads_of(monkeypatch, size):
    """Tiles of ``size`` heads (consecutive indices of the batch dim x = batch·head): work_division.query_tiles
    offered that group size alone, so that values are checked on a head × query tiling the estimate would not
    choose at these small sizes (its choice: test_the_tiling_chosen_...)."""
    choose = query_tiles_module.query_tiles
    monkeypatch.setattr(query_tiles_module, "query_tiles",
                        lambda graph, chain, machine, cores, sizes, windows:
                        choose(graph, chain, machine, cores, [size], windows))


def test_causal_grouped_query_attention_in_head_and_query_tiles_gives_torchs_values(monkeypatch):
    """16 query heads over 4 key/value heads (repeated), 512 rows, 4 cores: groups of 8 heads fit in two row tiles
    (8 × 256 × 8 score sticks over 4 cores, 4,096 a core): 2 groups × 2 row tiles, each reading its group's
    windows of Kᵀ and V, joined along the rows in each group, then along the heads."""
    def causal(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)

    _heads_of(monkeypatch, 8)
    q, k, v = _qkv(16, 512, seed=11)
    ops = _compile(causal, q, k[:, :4], v[:, :4], cache=False)
    assert _fused(ops) == 4
    assert [p for p in ops if "cat" in p] == [["cat"]] * 3


def test_a_key_padding_mask_per_batch_in_head_tiles_gives_torchs_values(monkeypatch):
    """Two batches of 8 heads, 257 rows, one core, a key-padding mask (2, 1, 1, 257) differing per batch: groups of 8
    heads (one batch each) need two row tiles (8 × 129 × 5 sticks: 5,160), and read their batch's row of the
    mask through a window; groups of 4 heads (half a batch: the scores' (2, 8) heads as a box (1, 4)) one."""
    g = torch.Generator().manual_seed(12)
    q, k, v = [torch.randn(2, 8, 257, 64, generator=g).half() for _ in range(3)]
    padding = torch.zeros(2, 1, 1, 257).half()
    padding[0, ..., 190:] = float("-inf")
    padding[1, ..., 40:] = float("-inf")
    for size, fused in ((8, 4), (4, 4)):
        _heads_of(monkeypatch, size)
        assert _fused(_compile(F.scaled_dot_product_attention, q, k, v, padding, cores=1, cache=False)) == fused


def test_a_mask_per_head_in_head_and_query_tiles_gives_torchs_values(monkeypatch):
    """A mask computed on the card per head and row (1, 8, 512, 512), 2 cores: groups of 4 heads in two row tiles (4
    × 256 × 8 sticks over 2 cores: 4,096 a core), each tile reading its window of the mask's heads and rows."""
    def per_head(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m * 2)

    _heads_of(monkeypatch, 4)
    q, k, v = _qkv(8, 512, seed=13)
    mask = torch.randn(1, 8, 512, 512, generator=torch.Generator().manual_seed(14)).half()
    assert _fused(_compile(per_head, q, k, v, mask, cores=2, cache=False)) == 4


def test_the_tiling_chosen_for_two_batches_of_flash_attention_heads(monkeypatch):
    """Two batches of 32 heads of 4,096 (head dim 128: 64 score sticks a row), 32 cores, causal. All 64 heads, two a
    core, fit in tiles of 48 rows (2 × 48 × 64 = 6,144 sticks of the 6,348 that fit; 56 do not): 86 row tiles, each
    reading all of Kᵀ and V (134 MB). A group smaller than the batch dim may not share a head's rows among cores
    (work_division._tile_splits), so a core holds at least one head's rows: 96 rows (6,144 sticks), 43 row tiles,
    whatever the group. Groups of 32 heads (one batch) in 43 row tiles read Kᵀ and V half as often as all heads, for
    two windows each of Q, Kᵀ and V and one more cat; smaller groups need more windows for no fewer row tiles. Only
    the choice is computed (no simulation)."""
    chosen = []

    def spy(graph, chain, machine, cores, sizes, windows):
        chosen.append(work_division.query_tiles(graph, chain, machine, cores, sizes, windows))
        raise RuntimeError("chosen")

    monkeypatch.setattr(query_tiles_module, "query_tiles", spy)
    with pytest.raises(Exception, match="chosen"):
        _launches(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                  *[(2, 32, 4096, 128)] * 3, cores=32)
    groups, rows = chosen[0]
    assert groups == [(0, 32), (32, 64)]
    assert len(rows) == 43


def test_the_reference_simulator_times_head_tiles_alike(monkeypatch):
    """Two groups of 4 of 8 heads (256 rows, one core): the windows of a group's Q, Kᵀ and V (a row of 4 heads'
    sticks a piece), its fused tile, and the cat joining the groups along the heads time the same in the engine and
    the simpy reference."""
    machine = load_machine()
    _heads_of(monkeypatch, 4)
    _compile(F.scaled_dot_product_attention, *_qkv(8, 256, seed=15), cores=1, cache=False)
    programs = last_report().kernel_programs
    ops = [[k["op"] for k in p["kernels"]] for p in programs]
    assert _fused(ops) == 2
    assert ops[-1] == ["cat"]
    first = ops.index(next(p for p in ops if "softmax" in p))
    for i in [*range(first + 1), len(programs) - 1]:
        assert_agree(pipeline.parse(programs[i], machine, f"heads{i}").units, machine)
