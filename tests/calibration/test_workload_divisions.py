"""The divisions validate's workloads give a figure: unequal row slices where the rows do not divide over the
cores, and, for a matmul that publishes none, a division the 256 MB rule lets the card run."""

import numpy as np
import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.pipeline import parse, run
from spyre_emu.validation.workloads import (
    matmul_program,
    pointwise_program,
    softmax_tile_program,
    span_problem,
    unpublished_split,
)
from tests.conftest import card_fp16

LM_HEAD = (1, 64, 49155, 4096)  # Granite's vocabulary: 769 sticks of N, prime, so no N split is even


@pytest.mark.parametrize("split", [(1, 32, 1, 1), (1, 1, 32, 1), (1, 1, 16, 2), (1, 1, 1, 32), (1, 2, 16, 1)])
def test_the_span_rule_before_lowering_agrees_with_the_lowering(spyre, split):
    """B is 4096 x 49155 fp16, 403 MB in sticks of N: a core holding every column of it spans all of it, whatever
    slice of K it takes."""
    problem = span_problem(*LM_HEAD, split)
    try:
        parse(matmul_program(*LM_HEAD, split), spyre, "lm_head")
        refused = ""
    except ProgramError as exc:
        refused = str(exc)
    assert ("span" in refused) == bool(problem)
    assert bool(problem) == (split[2] == 1)  # every column of B: all of it, whatever K slice


def test_an_unpublished_division_is_one_the_card_can_run(spyre):
    """The only even divisions of the LM head split M; each leaves a core all 403 MB of B, which the rule refuses,
    so the choice is an unequal N split (it picked (1, 32, 1, 1), a case not run)."""
    split = unpublished_split(*LM_HEAD)
    assert split == (1, 1, 32, 1)
    assert run(parse(matmul_program(*LM_HEAD, split), spyre, "lm_head"), spyre).report.data["card_cycles"] > 0


def test_rows_that_do_not_divide_over_the_cores_are_cut_unequally(spyre):
    """1001 rows on 8 cores: slices of 126 and 125 rows, and every row computed."""
    x = card_fp16(np.random.default_rng(3).standard_normal((1001, 192))).astype(np.float16)  # card-exact values
    got = run(parse(pointwise_program("neg", 1001, 192, 8, "n"), spyre, "n"), spyre, functional=True,
              inputs={"x": x}).outputs["y"]
    np.testing.assert_array_equal(got, -x)
    tile = run(parse(softmax_tile_program(0, 8, "s", 250, 192), spyre, "s"), spyre, functional=True,
               inputs={"x": x[:250]}).outputs["y"].astype(np.float32)
    e = np.exp(x[:250].astype(np.float32) - x[:250].astype(np.float32).max(axis=1, keepdims=True))
    np.testing.assert_allclose(tile, e / e.sum(axis=1, keepdims=True), atol=2e-3)


@pytest.mark.parametrize(("shape", "split"), [((1, 64, 4096, 4096), (1, 2, 8, 2)), ((32, 512, 128, 512), (4, 1, 2, 4)),
                                              ((1, 64, 4096, 4096), (1, 1, 1, 32))])
def test_a_k_groups_cores_are_ring_neighbours(spyre, shape, split):
    """The sweeps ran with torch-spyre's core_id_k_fast_emission: K varies fastest over the cores, so the k
    members of a K group are cores g k .. g k + k - 1, and every reduction send goes to the next of them."""
    k = split[3]
    units = parse(matmul_program(*shape, split), spyre, "t").units
    sends = [(core, ins.args["to_core"]) for (core, unit), items in units.streams.items() if unit == "send"
             for ins in items]
    assert len({core for core, _ in sends}) == 32
    assert all(to == core // k * k + (core + 1) % k for core, to in sends)


def test_without_a_k_split_the_batch_varies_fastest(spyre):
    """SuperDSC's own order ([x,] mb, out, in, first fastest) where K is whole."""
    kernel = matmul_program(32, 512, 128, 512, (4, 4, 2, 1))["kernels"][0]
    assert list(kernel["dims"]) == list(kernel["work_division"]) == ["x", "mb", "out", "in"]
    assert list(matmul_program(32, 512, 128, 512, (4, 2, 1, 4))["kernels"][0]["dims"]) == ["in", "x", "mb", "out"]
