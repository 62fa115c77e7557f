"""The card's allocator on its own: 128 B blocks, first fit, freed blocks merged with their neighbours."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spyre_emu.frontend.device.memory import CardMemory, OutOfMemoryError


def test_blocks_are_whole_sticks_first_fit():
    mem = CardMemory(1024)
    assert mem.allocate(1) == 0
    assert mem.allocate(129) == 128      # two sticks
    assert mem.allocate(0) == 384        # an empty tensor still has an address
    assert mem.stats.allocated == 512
    mem.free(128)                        # a 256 B hole at 128
    assert mem.allocate(300) == 512      # 384 B does not fit the hole: the first block that fits
    assert mem.allocate(100) == 128      # the hole's first stick
    assert mem.allocate(128) == 256      # and its second
    assert mem.stats.allocated == mem.stats.peak == 896


def test_freed_neighbours_merge():
    mem = CardMemory(512)
    a, b, c, d = (mem.allocate(128) for _ in range(4))
    for block in (b, d, c):
        mem.free(block)
    assert mem.allocate(384) == b        # b, c and d merged into one block
    mem.free(a)
    mem.free(b)
    assert mem.free_sizes == {0: 512}
    assert (mem.stats.allocations, mem.stats.frees) == (5, 5)


def test_out_of_memory_names_the_request_and_what_is_free():
    mem = CardMemory(512)
    mem.allocate(128)
    mem.allocate(128)
    mem.free(0)
    with pytest.raises(OutOfMemoryError, match=r"300 B requested, 384 B free of 512 B \(largest free block 256 B\)"):
        mem.allocate(300)


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 700)), max_size=60))
def test_blocks_never_overlap_and_the_books_balance(steps):
    """Any sequence of allocations and frees: blocks are stick-aligned and disjoint, the statistics
    equal the live blocks, and free plus used space is the capacity."""
    mem = CardMemory(4096)
    live: list[int] = []
    for allocate, n in steps:
        if allocate or not live:
            try:
                live.append(mem.allocate(n))
            except OutOfMemoryError:
                pass
        else:
            mem.free(live.pop(n % len(live)))
        spans = sorted((start, start + size) for start, size in mem.used.items())
        assert all(start % 128 == 0 for start, _ in spans)
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:], strict=False))
        assert mem.stats.allocated == sum(mem.used.values())
        assert mem.stats.allocated + sum(mem.free_sizes.values()) == 4096
