"""Attention as one launch: Q·Kᵀ, scale, softmax and P·V split alike, the scores and probabilities in LX."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from spyre_emu.frontend import last_report  # noqa: E402

from spyre_emu import pipeline  # noqa: E402
from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.errors import ProgramError  # noqa: E402
from spyre_emu.lowering import matmul  # noqa: E402
from tests.frontend.conftest import assert_matches  # noqa: E402
from tests.reference.test_differential import assert_agree  # noqa: E402

pytestmark = pytest.mark.torch


def _sdpa(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _sdpa_masked(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _run(heads, length, options=None):
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, heads, length, 64, generator=g).half() for _ in range(3))
    with torch.no_grad():
        got = torch.compile(_sdpa, backend="spyre_emu", dynamic=False, options=options or {})(q, k, v)
        want = _sdpa(q.float(), k.float(), v.float())
    return got, want, last_report().kernel_programs


def test_sdpa_is_one_launch_with_its_scores_in_lx_and_gives_torchs_values():
    got, want, programs = _run(4, 128)
    assert len(programs) == 1
    (program,) = programs
    kernels = program["kernels"]
    assert [k["op"] for k in kernels] == ["batchmatmul", "mul", "softmax", "batchmatmul"]
    scores = [kernels[0]["outputs"][0], kernels[1]["outputs"][0], kernels[2]["outputs"][0]]
    assert [program["tensors"][t].get("space") for t in scores] == ["lx"] * 3
    assert kernels[3]["inputs"][0] == scores[-1]
    cuts = {tuple(k["work_division"].get(d, 1) for d in (("x", "mb") if "x" in k["dims"] else ("d0", "mb")))
            for k in kernels}
    assert len(cuts) == 1  # heads × query rows, the same on every kernel
    assert all(k["work_division"].get("out", 1) == 1 for k in kernels)
    assert_matches(got, want)


def test_a_chain_whose_scores_do_not_fit_and_end_in_no_pv_keeps_its_own_splits():
    """On 4 cores, 8 heads of 512 × 512 scores are 8,192 sticks per core: not even one score tensor fits in half
    the usable LX (6,348 sticks), and the probabilities are the call's result (no P·V whose rows query tiles would
    give apart: test_query_tiles.py), so the chain is not aligned and its scores go through DRAM."""
    g = torch.Generator().manual_seed(5)
    q, k = (torch.randn(8, 512, 64, generator=g).half() for _ in range(2))
    with torch.no_grad():
        got = torch.compile(_probabilities, backend="spyre_emu", dynamic=False, options={"cores": 4})(q, k)
    programs = last_report().kernel_programs
    assert len(programs) > 1
    assert programs[0]["kernels"][0]["work_division"].get("out", 1) > 1
    assert_matches(got, _probabilities(q.float(), k.float()))


def _probabilities(q, k):
    return torch.softmax(q @ k.transpose(-2, -1) * 0.125, -1)


def test_a_chain_whose_scores_fit_once_runs_its_softmax_over_them():
    """On 4 cores, 4 heads of 512 × 512 scores are 4,096 sticks per core: two score tensors would not fit in half
    the usable LX, one does. The scale writes its result over the scores and the softmax its result over that
    (one LX region), so the chain is one launch; torch's values (with a key-padding mask: B=4 as torch-spyre
    issue 4784 runs it, on fewer heads and cores), and the reference simulator's times for it."""
    got, want, programs = _run(4, 512, {"cores": 4})
    assert len(programs) == 1
    tensors = programs[0]["tensors"]
    kernels = {k["op"]: k for k in programs[0]["kernels"]}
    for op in ("mul", "softmax"):
        (x,), (y,) = kernels[op]["inputs"][:1], kernels[op]["outputs"]
        assert tensors[y]["in_place_of"] == x
    assert_matches(got, want)
    g = torch.Generator().manual_seed(7)
    q, k, v = (torch.randn(4, 1, 512, 64, generator=g).half() for _ in range(3))
    mask = torch.zeros(4, 1, 1, 512).half()
    for b, keep in enumerate((512, 300, 129, 1)):
        mask[b, ..., keep:] = float("-inf")
    with torch.no_grad():
        got = torch.compile(_sdpa_masked, backend="spyre_emu", dynamic=False, options={"cores": 4})(q, k, v, mask)
        want = _sdpa_masked(q.float(), k.float(), v.float(), mask.float())
    programs = last_report().kernel_programs
    assert len(programs) == 1
    assert [k["op"] for k in programs[0]["kernels"]] == ["batchmatmul", "mul", "add", "softmax", "batchmatmul"]
    assert sum("in_place_of" in t for t in programs[0]["tensors"].values()) == 3
    assert_matches(got, want)
    machine = load_machine()
    assert_agree(pipeline.parse(programs[0], machine, "attention").units, machine)  # the reference's times


def test_a_matmul_the_lowering_refuses_with_lx_operands_keeps_them_in_dram(monkeypatch):
    """Should the lowering refuse a matmul's LX A or C (in_place.py: a layout whose strides a PT pass cannot
    follow), the front end keeps those tensors in DRAM and runs the passes again: no CPU fallback."""
    real = matmul.in_place

    def refuse(piece, names, layouts, residents, source, path):
        if any(n in residents for n in names):
            raise ProgramError("refused for the test", source, path)
        return real(piece, names, layouts, residents, source, path)

    monkeypatch.setattr(matmul, "in_place", refuse)
    got, want, programs = _run(4, 128, {"cache": False})
    assert last_report().fallbacks == []
    for program in programs:
        for k in program["kernels"]:
            if k["op"] == "batchmatmul":
                assert all(program["tensors"][t].get("space", "dram") == "dram" for t in (*k["inputs"], *k["outputs"]))
    assert_matches(got, want)


def test_a_decode_chain_with_fewer_query_rows_than_a_pt_pass_keeps_its_own_splits():
    """4 query rows against 256 keys: no split gives a core a PT pass of rows (8), so Q·Kᵀ keeps its own split
    (its columns split over the cores), as before the alignment."""
    g = torch.Generator().manual_seed(6)
    q = torch.randn(1, 4, 4, 64, generator=g).half()
    k, v = (torch.randn(1, 4, 256, 64, generator=g).half() for _ in range(2))
    with torch.no_grad():
        got = torch.compile(_sdpa, backend="spyre_emu", dynamic=False)(q, k, v)
    first = last_report().kernel_programs[0]["kernels"][0]
    assert first["op"] == "batchmatmul"
    assert first["work_division"].get("out", 1) > 1
    assert_matches(got, _sdpa(q.float(), k.float(), v.float()))


def test_a_causal_mask_folded_at_compile_time_does_not_cut_the_attention_launch():
    """The causal mask is computed from no graph input (arange, comparisons: folded constants, host steps at
    compile time); placed where the graph computes it, between the scale and the mask's add, it cut the launch
    and sent the scaled scores through DRAM. Before the segment instead, Q·Kᵀ to P·V is one launch."""
    def causal(q, k, v):
        n = q.shape[-2]
        keep = torch.arange(n)[:, None] >= torch.arange(n)[None, :]
        return F.scaled_dot_product_attention(q, k, v, attn_mask=keep)

    g = torch.Generator().manual_seed(8)
    q, k, v = (torch.randn(1, 4, 128, 64, generator=g).half() for _ in range(3))
    with torch.no_grad():
        got = torch.compile(causal, backend="spyre_emu", dynamic=False)(q, k, v)
        want = causal(q.float(), k.float(), v.float())
    programs = last_report().kernel_programs
    assert [[k["op"] for k in p["kernels"]] for p in programs] == [["batchmatmul", "mul", "add", "softmax",
                                                                     "batchmatmul"]]
    assert_matches(got, want)


@pytest.mark.parametrize("batch", [2, 3, 4])
def test_a_key_padding_mask_is_read_at_its_own_size(batch):
    """A (B, 1, 1, L) mask over the scores (B·H, L, L), batch and heads one dim: the add reads it as (B, 1, L),
    each batch's row covering its H heads (no host expansion to the scores' size); torch's values, and the
    reference simulator's times for the launch."""
    g = torch.Generator().manual_seed(9)
    q, k, v = (torch.randn(batch, 3, 128, 64, generator=g).half() for _ in range(3))
    mask = torch.zeros(batch, 1, 1, 128).half()
    for b in range(batch):
        mask[b, ..., 128 - 37 * b:] = float("-inf")
    with torch.no_grad():
        got = torch.compile(_sdpa_masked, backend="spyre_emu", dynamic=False)(q, k, v, mask)
        want = _sdpa_masked(q.float(), k.float(), v.float(), mask.float())
    (program,) = last_report().kernel_programs
    (add,) = [k for k in program["kernels"] if k["op"] == "add"]
    assert [program["tensors"][t]["shape"] for t in add["inputs"]] == [[batch * 3, 128, 128], [batch, 1, 128]]
    assert_matches(got, want)
    if batch == 2:
        machine = load_machine()
        assert_agree(pipeline.parse(program, machine, "attention").units, machine)


def test_a_mask_per_head_shared_by_the_batches_is_not_read_as_consecutive_positions():
    """A (1, H, 1, L) mask over the scores (B·H, L, L): in the merged dim the heads vary fastest, so merged index h
    needs mask row h % H, which the pointwise rule h // (m / n) does not give (layout._grouped takes a group whose
    leading dims are whole and the rest broadcast, not the reverse); torch's values."""
    g = torch.Generator().manual_seed(10)
    q, k, v = (torch.randn(2, 3, 64, 64, generator=g).half() for _ in range(3))
    mask = torch.zeros(1, 3, 1, 64).half()
    mask[0, 0, :, 10:] = float("-inf")
    mask[0, 1, :, 40:] = float("-inf")
    with torch.no_grad():
        got = torch.compile(_sdpa_masked, backend="spyre_emu", dynamic=False)(q, k, v, mask)
    assert_matches(got, _sdpa_masked(q.float(), k.float(), v.float(), mask.float()))
