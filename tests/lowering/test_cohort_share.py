"""cohorts.share: a tile's runs cut into the loaders' parts, whole runs in order, each at its LX address."""

import random

from spyre_emu.lowering.cohorts import share


def _sticks(tile):
    """(run, LX address) of every run of a tile, in order."""
    out = []
    for runs, lx in tile:
        at = lx
        for first, n in runs:
            out.append(((first, n), at))
            at += n * 128
    return out


def test_parts_are_the_tiles_runs_in_order_at_their_addresses():
    rng = random.Random(12)
    for _ in range(3000):
        tile, lx = [], 0
        for _ in range(rng.randrange(0, 6)):
            runs = [(rng.randrange(1000), rng.randrange(1, 4)) for _ in range(rng.randrange(0, 7))]
            lx += rng.choice([0, 128, 1024])
            tile.append((runs, lx))
            lx += sum(n for _, n in runs) * 128
        parts = share(tile, rng.randrange(1, 9))
        assert [x for part in parts for x in _sticks(part)] == _sticks(tile)
        counts = [sum(len(runs) for runs, _ in part) for part in parts]
        assert max(counts) - min(counts) <= 1
        assert counts == sorted(counts, reverse=True)
        assert all(runs for part in parts for runs, _ in part)  # no empty list
