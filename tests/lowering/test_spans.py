"""The 256 MB rule (lowering/spans.py): decided before lowering where the division decides it, with the very
message the check on the lowered instructions gives."""

import itertools
import random

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.kernel_program import default_layout, device_bytes
from spyre_emu.lowering import matmul, spans
from spyre_emu.lowering.placement import grid_sticks, stick_of
from spyre_emu.pipeline import parse, run
from spyre_emu.validation.workloads import matmul_program

MB256 = 256 << 20


@pytest.mark.parametrize(("shape", "order"), [((5, 100, 150), None), ((5, 100, 150), (2, 0, 1)),
                                              ((3, 70, 9, 130), (1, 3, 0, 2)), ((200, 64), (1, 0))])
def test_box_span_is_the_first_and_last_stick_of_every_index_in_the_box(shape, order):
    layout = default_layout(shape, "fp16", order)
    rng = random.Random(1)
    for _ in range(20):
        box = [tuple(sorted(rng.sample(range(n + 1), 2))) for n in shape]
        host = np.array(list(itertools.product(*(range(a, b) for a, b in box)))).T
        sticks = stick_of(layout, host)
        assert spans.box_span(layout, box) == (sticks.min() * 128, (sticks.max() + 1) * 128)


def test_the_limit_itself_is_allowed():
    """C [2048, 65536] fp16 is 2048 x 1024 sticks = 268,435,456 B: a core owning all of it is at the limit."""
    c = default_layout((2048, 65536), "fp16")
    spans.check_boxes([(0, [("C", c, [(0, 2048), (0, 65536)])])], "p.json", "kernels[0].work_division")
    c = default_layout((2049, 65536), "fp16")
    with pytest.raises(ProgramError, match=f"p.json: kernels\\[0\\].work_division: core 0 would span {MB256 + 131072} "
                                           f"B of tensor 'C'; at most {MB256} B per core"):
        spans.check_boxes([(0, [("C", c, [(0, 2049), (0, 65536)])])], "p.json", "kernels[0].work_division")


def test_qk_with_n_over_32_cores_is_refused_before_lowering(spyre, monkeypatch):
    """QK^T [40, 2048, 128] x [40, 128, 4096] at (1, 1, 32, 1) lowered for 15-31 s before this refusal (e3b63ff
    gave this message after lowering). C's device layout is [M][N sticks][B][64]: core 0 owns N sticks 0-1 of
    every row and batch, sticks 0 .. (2047 * 64 + 1) * 40 + 39, so (2047 * 64 + 2) * 40 * 128 = 670,771,200 B."""
    monkeypatch.setattr(matmul, "lower_matmul", None)  # never reached
    with pytest.raises(ProgramError) as refused:
        parse(matmul_program(40, 2048, 4096, 128, (1, 1, 32, 1)), spyre, "sweep.csv row 7")
    assert str(refused.value) == ("sweep.csv row 7: kernels[0].work_division: core 0 would span 670771200 B of "
                                  "tensor 'C'; at most 268435456 B per core: split the work over more cores")


def _outcome(data, machine) -> str:
    try:
        parse(data, machine, "p.json")
    except ProgramError as exc:
        return str(exc)
    return "lowered"


def _rows(count: int) -> list[tuple[int, int, int, int, tuple[int, int, int, int]]]:
    rng = random.Random(36)
    rows = []
    while len(rows) < count:
        b, m, n, k = (rng.choice(c) for c in ([1, 2, 3, 5], [8, 24, 64], [64, 192, 320], [64, 256]))
        split = (rng.choice([1, 2, 3]) if b > 1 else 1, *(rng.choice(c) for c in ([1, 2, 4], [1, 2, 5], [1, 2])))
        if split[2] <= n // 64 and split[3] <= k // 64 and split[0] <= b:
            rows.append((b, m, n, k, split))
    return rows


@pytest.mark.parametrize("limit_share", [0.15, 0.4])
def test_early_and_lowered_refusals_agree(spyre, monkeypatch, limit_share):
    """With the limit scaled down to small matmuls, every division gets the same outcome (lowered, or the same
    message) with the check before lowering as with the check on the lowered instructions alone; some divisions
    are refused early, and some are left to the lowered check (shared operands, split K)."""
    early, refused = [], 0

    def recorded(*args):
        try:
            spans_check(*args)
        except ProgramError:
            early.append(True)
            raise
    spans_check = matmul.check_boxes
    for b, m, n, k, split in _rows(24):
        largest = 2 * b * max(m * k, k * n, m * n)
        monkeypatch.setattr(spans, "MAX_SPAN_BYTES", int(largest * limit_share) // 128 * 128)
        data = matmul_program(b, m, n, k, split)
        monkeypatch.setattr(matmul, "check_boxes", lambda *args: None)
        lowered = _outcome(data, spyre)
        monkeypatch.setattr(matmul, "check_boxes", recorded)
        assert _outcome(data, spyre) == lowered, (b, m, n, k, split)
        refused += lowered != "lowered"
    assert 3 <= len(early) < refused


def test_a_division_under_the_limit_runs(spyre, monkeypatch):
    """At the (scaled) limit a division lowers and runs; one row more is refused. C [2, M, 128] is laid out
    [M][2 N sticks][2 batches][64]: core 0 of n = 2 owns N stick 0, sticks 0 .. (M - 1) * 4 + 1."""
    monkeypatch.setattr(spans, "MAX_SPAN_BYTES", (63 * 4 + 2) * 128)
    assert run(parse(matmul_program(2, 64, 128, 64, (1, 1, 2, 1)), spyre, "p.json"), spyre, cache=False).report
    with pytest.raises(ProgramError, match=f"core 0 would span {(64 * 4 + 2) * 128} B of tensor 'C'"):
        parse(matmul_program(2, 65, 128, 64, (1, 1, 2, 1)), spyre, "p.json")


@pytest.mark.parametrize(("shape", "order", "dtype"), [
    ((4096, 12800), None, "fp16"), ((300, 130), None, "fp32"), ((8, 2048, 128), None, "fp16"),
    ((5, 100, 150), (1, 2, 0), "fp16"), ((3, 70, 200), (2, 0, 1), "fp16"), ((3, 70, 9, 130), (1, 3, 0, 2), "fp16")])
def test_grid_sticks_are_stick_of_over_the_grid_spelled_out(shape, order, dtype):
    """A grid's stick ids summed per host dim are ``stick_of``'s, index by index, in any axis order."""
    layout = default_layout(shape, dtype, order)
    rng = np.random.default_rng(len(shape))
    axes = [np.sort(rng.choice(n, min(n, 9), replace=False)) for n in shape]
    for perm in itertools.permutations(range(len(shape))):
        host = np.array([idx for idx in itertools.product(*(axes[d] for d in perm))]).T
        spelled = stick_of(layout, host[np.argsort(perm)]).reshape([len(axes[d]) for d in perm])
        np.testing.assert_array_equal(grid_sticks(layout, axes, perm), spelled)


def test_a_dim_of_one_device_dim_is_spanned_without_listing_its_indices():
    """A billion rows (an 8 GB index list, had the span listed them): their sticks' least and greatest come from
    the ends of the range, whole periods and wraps included."""
    layout = default_layout((10**9, 128), "fp16")
    assert spans.box_span(layout, [(0, 10**9), (0, 128)]) == (0, device_bytes(layout))
    assert spans.box_span(layout, [(5, 6), (64, 128)]) == spans.box_span(layout, [(5, 6), (64, 65)])
