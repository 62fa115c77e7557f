"""vllm bench serve's metrics against a hand computation, and the invariants of any run."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from spyre_emu.serving import SchedulerConfig, memoized, simulate, summarize
from spyre_emu.serving.workload import Request, arrivals, build, random_lengths


def test_metrics_by_hand():
    """1 ms steps: P0 [0,1] D0 [1,2] P1 [2,3] D0 [3,4]. Request 0 gets tokens at 1, 2, 4 ms, request 1 (one
    token) at 3 ms: TTFT 1 and 3, TPOT (4 - 1) / 2 = 1.5 (0 only), ITL 1 and 2, E2EL 4 and 3."""
    run = simulate([Request(0, 0.0, 64, 3), Request(1, 0.0, 64, 1)], SchedulerConfig(), lambda s: 1000.0)
    got = summarize(run, goodput={"ttft": 2.0})
    want = {"duration": 0.004, "completed": 2, "failed": 0, "total_input_tokens": 128, "total_output_tokens": 4,
            "request_throughput": 500.0, "request_goodput": 250.0, "output_throughput": 1000.0,
            "total_token_throughput": 33000.0,
            "mean_ttft_ms": 2.0, "median_ttft_ms": 2.0, "std_ttft_ms": 1.0, "p99_ttft_ms": 2.98,
            "mean_tpot_ms": 1.5, "median_tpot_ms": 1.5, "std_tpot_ms": 0.0, "p99_tpot_ms": 1.5,
            "mean_itl_ms": 1.5, "median_itl_ms": 1.5, "std_itl_ms": 0.5, "p99_itl_ms": 1.99,
            "mean_e2el_ms": 3.5, "median_e2el_ms": 3.5, "std_e2el_ms": 0.5, "p99_e2el_ms": 3.99}
    assert list(got) == list(want)
    assert got == pytest.approx(want, rel=1e-12)
    assert summarize(run)["request_goodput"] is None
    assert summarize(run, goodput={"tpot": 1.4})["request_goodput"] == 250.0  # a 1-token request's TPOT is 0


def _workload(seed: int, count: int = 60, rate: float = 40.0, burstiness: float = 0.5, input_len: int = 250):
    rng = np.random.default_rng(seed)
    return build(random_lengths(count, input_len, 40, 0.9, rng), arrivals(count, rate, burstiness, rng))


def _price(shape):
    """A made-up cost: 2 ms plus 5 µs per token and 0.1 µs per key per sequence."""
    return 2000.0 + 5.0 * shape.batch * shape.tokens + 0.1 * shape.batch * shape.tkv


CONFIG = SchedulerConfig(max_num_seqs=8, max_model_len=1024, max_batch_tkv=3000, kv_blocks=60)


def test_a_seed_gives_byte_identical_results():
    runs = [summarize(simulate(_workload(7), CONFIG, memoized(_price))) for _ in range(2)]
    assert json.dumps(runs[0]) == json.dumps(runs[1])
    assert runs[0] != summarize(simulate(_workload(8), CONFIG, memoized(_price)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_invariants_of_a_run(seed):
    price = memoized(_price)
    requests = _workload(seed)
    run = simulate(requests, CONFIG, price)
    for record in run.requests:  # token conservation
        assert len(record.token_s) == record.request.output_tokens
        prefill = sum(s.end_s - s.start_s for s in run.steps if s.kind == "prefill" and record.request.id in s.requests)
        assert record.token_s[0] - record.sent_s >= prefill - 1e-12  # TTFT never below its own prefill steps
        assert record.sent_s >= record.request.arrival_s
    assert sum(len(s.requests) for s in run.steps if s.kind == "decode") + len(requests) == \
        sum(r.request.output_tokens for r in run.requests)
    for before, after in itertools.pairwise(run.steps):  # one step at a time
        assert after.start_s >= before.end_s
        if before.kind == after.kind == "prefill":  # never two prefills in a row while a request decodes
            assert not [r for r in run.requests if r.token_s[0] <= before.end_s < r.token_s[-1]]
    for step in run.steps:  # admission never exceeds the limits (prompts of one chunk: no decode runs ahead)
        assert step.shape.batch <= CONFIG.max_num_seqs
        assert step.kv_used_blocks <= CONFIG.kv_blocks
        assert step.volume <= CONFIG.max_batch_tkv
    fastest = max(s.batch / price(s) for s in price.prices if s.kind == "decode") * 1e6  # tokens per second
    result = summarize(run)
    assert result["output_throughput"] * result["duration"] <= fastest * sum(s.end_s - s.start_s for s in run.steps) \
        + len(requests)  # decode tokens at the best rate any step allows, plus one token per prefill
