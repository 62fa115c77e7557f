"""View algebra and restickify plans: element orders against numpy, and the plans against the lowering."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend import last_report  # noqa: E402
from spyre_emu.frontend.views import (  # noqa: E402
    Order,
    accepted,
    gathered_as,
    is_grouping,
    permuted,
    plan,
    refine,
    relative,
)

from spyre_emu.config import load_machine  # noqa: E402
from spyre_emu.kernel_program import parse_kernel_program  # noqa: E402
from spyre_emu.lowering import lower  # noqa: E402
from spyre_emu.numerics import to_card, to_host  # noqa: E402
from spyre_emu.pipeline import Program, run  # noqa: E402

pytestmark = pytest.mark.torch


def _view(base: tuple[int, ...], shape: tuple[int, ...], perm: tuple[int, ...]) -> Order:
    """The order of base.reshape(shape).permute(perm)."""
    return permuted(Order.of(base), shape, perm)


def _apply(order: Order, data: np.ndarray) -> np.ndarray:
    return data.reshape(order.atoms).transpose(order.perm).reshape(-1)


def test_refine_and_grouping():
    assert refine((4, 12), (2, 24)) == (2, 2, 12)
    assert refine((4, 6), (6, 4)) is None
    assert is_grouping((1, 4, 16, 32), (64, 32))
    assert is_grouping((2, 3, 4), (2, 12))
    assert not is_grouping((2, 3, 4), (3, 8))


def test_an_empty_view_reads_no_elements():
    """Any order with a dim of 0 (an empty key/value cache) is the empty order, which reads nothing."""
    order = Order((2, 0, 64), (1, 0, 2)).canonical()
    assert order == Order((0,), (0,))
    assert _apply(order, np.zeros(0)).size == 0


def test_an_empty_cache_concatenated_on_the_card(check):
    """torch.cat of an empty (0,) tensor and the first keys (a DynamicCache's first step)."""
    def fn(x):
        keys = torch.cat([torch.tensor([], dtype=x.dtype), x], dim=-2)
        return keys * 2

    check(fn, torch.randn(1, 2, 8, 64).half())
    rep = last_report()  # the cat is the keys themselves: no host step, no round trip
    assert (rep.crossings, [s["op"] for s in rep.host_steps if s["kind"] != "constant"]) == ([], [])


@pytest.mark.parametrize("fn", [
    lambda x: torch.exp((-x).transpose(0, 1).contiguous()),                   # x (R, 8, C): the pointwise kernels
    lambda x: torch.exp((-x).view(16, 8, 4, 64).transpose(1, 2).contiguous()),  # hold it as (R * 8, C) and
])                                                                              # (R * 8 * 4, 64)
def test_an_outer_transpose_is_one_pass(check, fn):
    """A view that keeps the stick but permutes the rows of a tensor held in a coarser grouping is one restickify
    reading the tensor in the view's finer shape (x_shape), not a regrouping pass and then the permute."""
    check(fn, torch.randn(16, 8, 256).half())
    moves = [k for k in last_report().kernels if k["op"] == "ReStickifyOpHBM"]
    assert len(moves) == 1


def test_a_held_tensor_of_one_element_sticks_is_not_read_finer():
    """(256, 1) holds one element a stick: read as (2, 2, 64) no output stick is one input stick, so the plan does
    not take the one-pass gather (its innermost atom would come from the dim before the stick dim)."""
    assert not gathered_as((256, 1), (2, 2, 64), [1, 0, 2], (2, 2, 64))
    assert gathered_as((256, 128), (256, 2, 64), [1, 0, 2], (2, 256, 64))


def test_orders_compose_like_numpy():
    rng = np.random.default_rng(0)
    for _ in range(200):
        base = tuple(int(n) for n in rng.choice([1, 2, 3, 4, 6], rng.integers(1, 5)))
        data = np.arange(int(np.prod(base)))
        p1 = tuple(rng.permutation(len(base)))
        first = permuted(Order.of(base), base, p1)
        shape = tuple(base[i] for i in p1)
        p2 = tuple(rng.permutation(len(shape)))
        second = permuted(first, shape, p2)
        want = data.reshape(base).transpose(p1).transpose(p2).reshape(-1)
        np.testing.assert_array_equal(_apply(second, data), want)
        np.testing.assert_array_equal(_apply(relative(first, second), _apply(first, data)), want)


def test_plans_compute_the_view():
    """Every plan's kernels, run as numpy permute + reshape, give the view's elements."""
    rng = np.random.default_rng(1)
    planned = 0
    for _ in range(400):
        base = tuple(int(n) for n in rng.choice([1, 2, 3, 16, 32, 64, 96, 128], rng.integers(2, 5)))
        if np.prod(base) > 1 << 16:
            continue
        perm = tuple(rng.permutation(len(base)))
        order, out = _view(base, base, perm), tuple(base[i] for i in perm)
        held = _grouping(base, rng)
        steps = plan(order, held, _grouping(out, rng))
        if steps is None:
            continue
        x = np.arange(int(np.prod(base))).reshape(steps[0][0])
        for shape, q, y in steps:  # each kernel reads its input in its own shape, or the first in a finer one
            assert accepted(shape, q, y) if shape == held else gathered_as(held, shape, list(q), y)
            x = x.reshape(shape).transpose(q).reshape(y)
            held = y
        np.testing.assert_array_equal(x.reshape(-1), _apply(order, np.arange(x.size)))
        planned += 1
    assert planned > 200


def _grouping(shape: tuple[int, ...], rng: np.random.Generator) -> tuple[int, ...]:
    cuts = sorted({0, len(shape), *rng.integers(0, len(shape) + 1, 2).tolist()})
    return tuple(int(np.prod(shape[a:b])) for a, b in zip(cuts, cuts[1:], strict=False))


HEADS = [  # (base, view shape, perm, device shape of the base, device shape wanted, kernels)
    ((16, 128), (16, 4, 32), (1, 0, 2), (16, 128), (4, 16, 32), 2),        # heads out of a projection, hd 32
    ((16, 256), (16, 4, 64), (1, 0, 2), (16, 256), (4, 16, 64), 1),        # the same, hd 64: one gather, x read
    #                                                                        as (16, 4, 64)
    ((2, 16, 64), (2, 16, 64), (0, 2, 1), (2, 16, 64), (2, 64, 16), 1),    # K transposed for the scores
    ((4, 16, 32), (4, 16, 32), (1, 0, 2), (4, 16, 32), (16, 128), 2),      # heads back into rows, hd 32
    ((4, 16, 64), (4, 16, 64), (1, 0, 2), (4, 16, 64), (16, 256), 1),      # the same, hd 64: one gather
]


@pytest.mark.parametrize(("base", "shape", "perm", "dx", "dy", "kernels"), HEADS)
def test_attention_views_on_the_simulator(base, shape, perm, dx, dy, kernels):
    steps = plan(_view(base, shape, perm), dx, dy)
    assert len(steps) == kernels
    x = to_host(to_card(np.random.default_rng(2).standard_normal(dx).astype(np.float16), "fp16"), "fp16")  # card-held
    got, _ = _run_plan(x, steps)
    np.testing.assert_array_equal(got, x.reshape(shape).transpose(perm).reshape(dy))


def test_fine_reads_are_gathers_on_the_simulator():
    """Random views planned as one kernel reading the held tensor in a finer shape: the lowering gathers them (no
    transpose) and gives numpy's values."""
    rng = np.random.default_rng(3)
    ran = 0
    while ran < 12:
        base = tuple(int(n) for n in rng.choice([1, 2, 3, 64, 96, 128], rng.integers(2, 5)))
        if np.prod(base) > 1 << 15:
            continue
        perm = tuple(rng.permutation(len(base)))
        held = _grouping(base, rng)
        steps = plan(_view(base, base, perm), held, _grouping(tuple(base[i] for i in perm), rng))
        if steps is None or len(steps) != 1 or steps[0][0] == held:
            continue
        x = to_host(to_card(rng.standard_normal(held).astype(np.float16), "fp16"), "fp16")  # values the card holds
        got, transposes = _run_plan(x, steps)
        assert transposes == 0
        np.testing.assert_array_equal(got.reshape(-1), x.reshape(base).transpose(perm).reshape(-1))
        ran += 1


def _run_plan(x: np.ndarray, steps: list) -> tuple[np.ndarray, int]:
    """A plan's restickify kernels run functionally on the simulator from ``x`` (held in its own shape): the
    result and the number of SFU transposes the lowering emitted."""
    tensors = {"t0": {"shape": list(x.shape), "dtype": "fp16", "role": "input"}}
    program = []
    for i, (read, q, y) in enumerate(steps, start=1):
        tensors[f"t{i}"] = {"shape": list(y), "dtype": "fp16", "role": "output" if i == len(steps) else "intermediate"}
        program.append({"op": "ReStickifyOpHBM", "inputs": [f"t{i - 1}"], "outputs": [f"t{i}"],
                        "attrs": {"perm": list(q), "x_shape": list(read)},
                        "dims": {f"d{j}": n for j, n in enumerate(y)}, "work_division": {}})
    parsed = parse_kernel_program({"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
                                   "kernels": program}, "views")
    machine = load_machine()
    units = lower(parsed, machine)
    got = run(Program(units, parsed.tensors), machine, functional=True, inputs={"t0": x})
    return got.outputs[f"t{len(steps)}"], sum(i.op == "transpose" for i in units.instructions())
