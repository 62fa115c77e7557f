"""A model step as the card runs it: its shape (what the price depends on) and the pricer's type.

The serving model never computes a step's time itself: a pricer maps each distinct shape to
microseconds (the front end compiles and simulates the step; tests pass a formula), and
``memoized`` asks it once per shape, so a run of thousands of steps prices a few dozen.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple


class StepShape(NamedTuple):
    """``batch`` sequences of ``tokens`` new tokens each, attending over ``tkv`` keys (the tokens
    already in the KV cache plus the new ones, padded as the card pads them); ``tp`` cards."""

    batch: int
    tokens: int
    tkv: int
    tp: int = 1

    @property
    def kind(self) -> str:
        return "prefill" if self.tokens > 1 else "decode"


Pricer = Callable[[StepShape], float]  # a step's time in microseconds


def memoized(pricer: Pricer) -> Pricer:
    """``pricer`` asked once per distinct shape; ``.prices`` holds the answers in the order asked."""
    prices: dict[StepShape, float] = {}

    def price(shape: StepShape) -> float:
        if shape not in prices:
            prices[shape] = float(pricer(shape))
            if not prices[shape] > 0:
                raise ValueError(f"the pricer gave {prices[shape]} us for {shape}; a step takes time")
        return prices[shape]

    price.prices = prices  # type: ignore[attr-defined]
    return price
