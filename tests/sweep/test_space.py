"""Spaces expand to the points Ray Tune's vocabulary promises, in a fixed order, the same for a seed."""

from __future__ import annotations

import pytest

from spyre_emu.errors import ConfigError
from spyre_emu.sweep import choice, expand, grid_search, loguniform, randint, to_tune, uniform


def test_grids_cross_first_key_slowest_and_fixed_values_pass_through():
    points = expand({"a": grid_search([1, 2]), "b": grid_search(["x", "y", "z"]), "c": 7})
    assert points == [{"a": a, "b": b, "c": 7} for a in (1, 2) for b in "xyz"]


def test_samples_repeat_the_grid_and_draw_anew_within_bounds():
    points = expand({"g": grid_search([1, 2]), "u": uniform(0.5, 1.5), "r": randint(3, 6),
                     "l": loguniform(1e-3, 1.0), "c": choice([[1, 2], [3, 4]])}, num_samples=50, seed=1)
    assert len(points) == 100
    assert [p["g"] for p in points[:4]] == [1, 2, 1, 2]
    assert all(0.5 <= p["u"] < 1.5 and 3 <= p["r"] < 6 and 1e-3 <= p["l"] < 1.0 for p in points)
    assert {p["r"] for p in points} == {3, 4, 5}
    assert {tuple(p["c"]) for p in points} == {(1, 2), (3, 4)}
    assert len({p["u"] for p in points}) == 100  # drawn per point, not per sample


def test_a_seed_gives_the_same_points_and_another_seed_others():
    space = {"u": uniform(0, 1), "g": grid_search([1, 2, 3])}
    assert expand(space, 4, seed=7) == expand(space, 4, seed=7)
    assert expand(space, 4, seed=7) != expand(space, 4, seed=8)


def test_toml_tables_are_domains():
    assert expand({"a": {"grid_search": [1, 2]}, "b": {"choice": [5]}}) == [{"a": 1, "b": 5}, {"a": 2, "b": 5}]


@pytest.mark.parametrize(("space", "message"), [
    ({"a": {"grid_search": []}}, "space.a: grid_search has no values"),
    ({"a": {"grid_search": 3}}, "space.a: grid_search takes a list, got int"),
    ({"a": {"uniform": [2, 1]}}, "space.a: uniform needs low < high, got [2, 1]"),
    ({"a": {"randint": [0.5, 3]}}, "space.a: randint takes [low, high], two integers"),
    ({"a": {"loguniform": [0, 1]}}, "space.a: loguniform needs 0 < low < high, got [0, 1]"),
    ({"a": {"grid": [1]}}, "space.a: expected a value or one of"),
    # numpy raised OverflowError / ValueError from inside the draw (session 40's fuzzing): refused up front now
    ({"a": {"uniform": [0.0, float("inf")]}}, "space.a: uniform takes [low, high], two finite numbers"),
    ({"a": {"uniform": [-1e308, 1e308]}}, "space.a: uniform needs high - low to be finite"),
    ({"a": {"randint": [0, 2**70]}}, "space.a: randint takes [low, high], two integers of 64 bits"),
    ({"a": {"grid_search": list(range(200))}, "b": {"grid_search": list(range(200))},
      "c": {"grid_search": list(range(200))}}, "space: the space has 8,000,000 points"),
])
def test_bad_domains_are_one_line_errors(space, message):
    with pytest.raises(ConfigError) as err:
        expand(space)
    assert str(err.value).startswith(message)
    assert "\n" not in str(err.value)


def test_the_space_converts_to_ray_tune():
    tune = pytest.importorskip("ray.tune")
    space = to_tune({"a": grid_search([1, 2]), "b": uniform(0, 1), "c": 3})
    assert space["a"] == tune.grid_search([1, 2])
    assert space["c"] == 3
    assert isinstance(space["b"], tune.search.sample.Float)


@pytest.mark.parametrize(("samples", "seed", "message"), [
    (10**12, 0, "space: the space has 1,000,000,000,000 points (its grids crossed, times num_samples)"),
    (1, -1, "sweep.seed: seed must be at least 0, got -1"),
])
def test_impossible_sample_counts_and_seeds_are_refused_at_once(samples, seed, message):
    """num_samples = 10^12 built points until memory ran out (a hang); seed = -1 was numpy's ValueError."""
    with pytest.raises(ConfigError) as err:
        expand({"a": uniform(0, 1)}, num_samples=samples, seed=seed)
    assert str(err.value).startswith(message)
