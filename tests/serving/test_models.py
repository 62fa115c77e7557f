"""KV cache capacity from the cards' memory and the weights."""

from __future__ import annotations

import pytest

from spyre_emu.errors import ConfigError
from spyre_emu.serving.models import kv_blocks


def test_kv_blocks_are_what_the_cards_hold_after_the_weights():
    """3,000 B of weights, 100 B of keys and values per token, blocks of 4 tokens (400 B): one card of
    3,900 B keeps 900 B (2 blocks); two cards split the weights and the KV, 4,800 B (12 blocks)."""
    assert kv_blocks(3_000, 100, 3_900, 4) == 2
    assert kv_blocks(3_000, 100, 3_900, 4, cards=2) == 12


def test_weights_that_do_not_fit_are_a_one_line_error():
    with pytest.raises(ConfigError, match="do not fit 1 card"):
        kv_blocks(3_000, 100, 2_000, 4)
    assert kv_blocks(3_000, 100, 2_000, 4, cards=2) == 2
