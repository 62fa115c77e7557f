"""What the clients send: requests with their lengths and arrival times, as ``vllm bench serve``
makes them (its random dataset, Poisson or Gamma arrivals), seeded and deterministic.

Arrivals: with ``request_rate`` r (requests/s) and ``burstiness`` k, the gaps are Gamma(shape k,
scale 1/(k r)): k = 1 is a Poisson process, k < 1 burstier, k > 1 more regular; an infinite rate
sends every request at time 0 (with ``max_concurrency`` that is a closed loop of that many clients).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import ConfigError

MAX_LEN = 1 << 62


@dataclass(frozen=True)
class Request:
    """``prefix_id`` ≥ 0: requests with the same id share their first ``prefix_tokens`` prompt tokens."""

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_id: int = -1
    prefix_tokens: int = 0


def arrivals(count: int, rate: float, burstiness: float, rng: np.random.Generator) -> list[float]:
    """Send times in seconds: cumulative Gamma gaps, the first request at 0."""
    if not rate > 0:  # NaN too
        raise ConfigError(f"must be positive, got {rate}", None, "--request-rate")
    if not 0 < burstiness < math.inf:
        raise ConfigError(f"must be positive and finite, got {burstiness}", None, "--burstiness")
    if math.isinf(rate):
        return [0.0] * count
    scale = 1.0 / (rate * burstiness) if rate * burstiness > 0 else math.inf
    gaps = rng.gamma(burstiness, scale, size=count)
    gaps[0] = 0.0
    times = np.cumsum(gaps)
    if not math.isfinite(float(times[-1]) * 1e9):  # the engine counts whole nanoseconds
        raise ConfigError(f"{rate:g} requests/s (burstiness {burstiness:g}) sends requests later than the clock "
                          "counts", None, "--request-rate")
    return [round(float(t), 9) for t in times]  # whole nanoseconds, as the engine counts


def random_lengths(count: int, input_len: int, output_len: int, range_ratio: float,
                   rng: np.random.Generator) -> list[tuple[int, int]]:
    """vllm bench serve's random dataset: each length uniform in [len (1 - ratio), len (1 + ratio)]."""
    if not 0 <= range_ratio < 1:
        raise ConfigError(f"must be in [0, 1), got {range_ratio}", None, "--random-range-ratio")
    for name, value in (("--random-input-len", input_len), ("--random-output-len", output_len)):
        if not 1 <= value <= MAX_LEN:  # numpy draws the lengths as int64, up to len (1 + ratio)
            raise ConfigError(f"must be from 1 to 2^62, got {value}", None, name)

    def draw(n: int) -> np.ndarray:
        low, high = max(1, math.floor(n * (1 - range_ratio))), math.ceil(n * (1 + range_ratio))
        return rng.integers(low, high + 1, size=count)

    return [(int(i), int(o)) for i, o in zip(draw(input_len), draw(output_len), strict=True)]


def build(lengths: list[tuple[int, int]], times: list[float], prefix_tokens: int = 0) -> list[Request]:
    """Requests in send order; a shared prefix of ``prefix_tokens`` is prepended to every prompt."""
    return [Request(i, t, prefix_tokens + p, o, 0 if prefix_tokens else -1, prefix_tokens)
            for i, ((p, o), t) in enumerate(zip(lengths, times, strict=True))]
