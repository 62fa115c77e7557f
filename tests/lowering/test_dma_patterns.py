"""streams.patterns: runs of device sticks as strided descriptors, against its definition read one run at a time."""

import random

from spyre_emu.lowering.streams import patterns


def _greedy(runs):
    """The definition: a run that starts where a lone run ends lengthens it; else each run joins the last pattern
    when it has the pattern's length and steps by the pattern's stride from its last run (any step past the
    length, for the pattern's second run)."""
    out = []
    for start, n in runs:
        if out:
            first, size, count, stride = out[-1]
            if count == 1 and start == first + size:
                out[-1] = (first, size + n, 1, 0)
                continue
            step = start - (first + (count - 1) * stride)
            if size == n and (count == 1 and step > n or count > 1 and step == stride):
                out[-1] = (first, size, count + 1, step)
                continue
        out.append((start, n, 1, 0))
    return out


def test_patterns_follow_the_definition_and_give_back_the_runs():
    rng = random.Random(36)
    for _ in range(5000):
        runs, at = [], rng.randrange(5)
        for _ in range(rng.randrange(0, 15)):
            at += rng.choice([-9, 0, 1, 1, 2, 3, 5])
            runs.append((at, rng.choice([1, 1, 1, 2])))
            at += runs[-1][1]
        got = patterns(runs)
        assert got == _greedy(runs)
        sticks = [first + i * stride + j for first, size, count, stride in got
                  for i in range(count) for j in range(size)]
        assert sticks == [start + j for start, n in runs for j in range(n)]
