"""SFU instructions from address sequences: ``sfu.segments`` cuts positions into the fewest stretches the
greedy rule allows: each stretch has a contiguous output and every operand stepping by one stick or
staying on one, and none could take one more position."""

import numpy as np
import pytest

from spyre_emu.config import STICK_BYTES
from spyre_emu.lowering.sfu import segments


def _steady(addrs: list[np.ndarray], out: np.ndarray, s: int, e: int) -> bool:
    """Positions [s, e) can be one SFU instruction."""
    if np.any(np.diff(out[s:e]) != STICK_BYTES):
        return False
    return all(len(set(np.diff(a[s:e]).tolist())) <= 1 and set(np.diff(a[s:e]).tolist()) <= {0, STICK_BYTES}
               for a in addrs)


def _sequence(rng: np.random.Generator, n: int) -> np.ndarray:
    """Addresses that mostly step a stick, sometimes stay, sometimes jump (also by a non-stick amount)."""
    steps = rng.choice([STICK_BYTES, 0, 7, -3 * STICK_BYTES, 5 * STICK_BYTES], size=n, p=[0.6, 0.2, 0.05, 0.1, 0.05])
    return (64 * STICK_BYTES + np.cumsum(np.concatenate([[0], steps]))[:n]).astype(np.int64)


@pytest.mark.parametrize("seed", range(6))
def test_stretches_tile_the_positions_each_steady_and_maximal(seed):
    rng = np.random.default_rng(seed)
    for _ in range(300):
        n = int(rng.integers(0, 120))
        addrs = [_sequence(rng, n) for _ in range(int(rng.integers(0, 4)))]
        out = _sequence(rng, n)
        cuts = segments(addrs, out)
        bounds = [0, *(e for _, e in cuts)]
        assert cuts == list(zip(bounds[:-1], bounds[1:], strict=True))
        assert bounds[-1] == n
        assert all(e > s and _steady(addrs, out, s, e) for s, e in cuts)
        assert not any(_steady(addrs, out, s, e + 1) for s, e in cuts[:-1])


def test_an_operand_stepping_by_more_than_a_stick_cuts_every_position():
    """16,384 stretches of one position (an operand alternating between two sticks four apart): each one found."""
    n = 16384
    out = np.arange(n, dtype=np.int64) * STICK_BYTES
    flip = (np.arange(n) % 2) * 4 * STICK_BYTES
    assert segments([flip], out) == [(s, s + 1) for s in range(n)]
