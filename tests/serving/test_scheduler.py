"""The scheduler's rules, each on a hand-built request set with the exact step sequence expected.

Every step costs 1 ms here, so step i runs from i ms to i + 1 ms while requests wait for nothing.
A step is written (kind, batch, tokens, tkv, request ids)."""

from __future__ import annotations

import pytest

from spyre_emu.serving.engine import simulate
from spyre_emu.serving.scheduler import SchedulerConfig
from spyre_emu.serving.workload import Request

MS = 1000.0


def steps(requests, **config):
    run = simulate(requests, SchedulerConfig(**config), lambda shape: MS)
    return [(s.kind[0].upper(), s.shape.batch, s.shape.tokens, s.shape.tkv, s.requests) for s in run.steps], run


def req(rid, prompt, output, at=0.0, **kw):
    return Request(rid, at, prompt, output, **kw)


def test_a_prompt_is_cut_into_chunks_and_its_last_chunk_padded_to_a_block():
    got, _ = steps([req(0, 1100, 3)])
    assert got == [("P", 1, 512, 512, (0,)), ("P", 1, 512, 1024, (0,)), ("P", 1, 128, 1152, (0,)),
                   ("D", 1, 1, 1152, (0,)), ("D", 1, 1, 1152, (0,))]


def test_decodes_interleave_with_prefills_and_an_ongoing_prefill_goes_first():
    got, _ = steps([req(0, 64, 4), req(1, 1024, 2), req(2, 64, 2)])
    assert got == [("P", 1, 64, 64, (0,)), ("D", 1, 1, 128, (0,)),      # 65 keys: two blocks
                   ("P", 1, 512, 512, (1,)), ("D", 1, 1, 128, (0,)),
                   ("P", 1, 512, 1024, (1,)),                            # 1 ongoing, 2 waits
                   ("D", 2, 1, 1088, (0, 1)),                            # left-padded to 17 blocks
                   ("P", 1, 64, 64, (2,)), ("D", 1, 1, 128, (2,))]


def test_the_engine_sleeps_only_when_there_is_nothing_to_do():
    _, run = steps([req(0, 64, 2), req(1, 64, 2, at=10.0)])
    assert [(s.kind, s.start_s, s.end_s) for s in run.steps] == [
        ("prefill", 0.0, 0.001), ("decode", 0.001, 0.002), ("prefill", 10.0, 10.001), ("decode", 10.001, 10.002)]


def test_max_num_seqs_holds_a_request_back_until_one_finishes():
    got, _ = steps([req(0, 64, 2), req(1, 64, 2)], max_num_seqs=1)
    assert [g[0] + str(g[4]) for g in got] == ["P(0,)", "D(0,)", "P(1,)", "D(1,)"]


@pytest.mark.parametrize(("limit", "prefill_of_1_at"), [(256, 2), (255, 65)])
def test_batch_times_tkv_at_the_volume_limit(limit, prefill_of_1_at):
    """Both end at 64 + 64 = 128 keys: together 2 × 128 = 256, within a limit of 256, over 255."""
    got, _ = steps([req(0, 64, 65), req(1, 64, 65)], max_batch_tkv=limit)
    assert [i for i, g in enumerate(got) if g[0] == "P"] == [0, prefill_of_1_at]


@pytest.mark.parametrize(("blocks", "prefill_of_1_at"), [(4, 2), (3, 65)])
def test_kv_blocks_for_prompt_and_output_are_reserved_at_admission(blocks, prefill_of_1_at):
    """Each needs ceil((64 + 65 - 1) / 64) = 2 blocks."""
    got, _ = steps([req(0, 64, 65), req(1, 64, 65)], kv_blocks=blocks)
    assert [i for i, g in enumerate(got) if g[0] == "P"] == [0, prefill_of_1_at]


def test_no_sequence_may_pass_max_model_len_once_aligned():
    """max_model_len 128: 0 (49 + 17) aligned behind 1's 70-token prompt would reach 64 + 49 + 16 =
    129 keys, so 1 waits until 0 fills its first block (15 decodes), as sendnn-inference's
    test_prefill_tkv_too_big expects (prefill of 1 at its step 17, counting from 1)."""
    got, _ = steps([req(0, 49, 17), req(1, 70, 17)], max_num_seqs=2, max_model_len=128)
    assert [i for i, g in enumerate(got) if g[0] == "P"] == [0, 16]
    assert got[16] == ("P", 1, 128, 128, (1,))


def test_prefix_caching_skips_whole_cached_chunks_but_never_the_last():
    shared = {"prefix_id": 0, "prefix_tokens": 1024}
    got, _ = steps([req(0, 1124, 1, **shared), req(1, 1124, 1, at=1.0, **shared), req(2, 1024, 1, at=2.0, **shared)])
    assert got == [("P", 1, 512, 512, (0,)), ("P", 1, 512, 1024, (0,)), ("P", 1, 128, 1152, (0,)),
                   ("P", 1, 128, 1152, (1,)),  # chunks 0 and 1 cached
                   ("P", 1, 512, 1024, (2,))]   # chunk 0 cached, chunk 1 is its last
    assert steps([req(0, 1124, 1, **shared), req(1, 1124, 1, at=1.0, **shared)], prefix_caching=False)[0][3] == \
        ("P", 1, 512, 512, (1,))


def test_a_request_longer_than_max_model_len_is_refused_without_a_step():
    got, run = steps([req(0, 3000, 73)])
    assert got == []
    assert run.requests[0].error.startswith("prompt + output (3073) > max_model_len")


def test_max_concurrency_sends_a_request_when_one_in_flight_ends():
    """A closed loop of one client: request 1 is sent at 2 ms, when request 0's last token arrives."""
    run = simulate([req(0, 64, 2), req(1, 64, 2)], SchedulerConfig(), lambda shape: MS, max_concurrency=1)
    assert [(r.sent_s, r.token_s) for r in run.requests] == [(0.0, [0.001, 0.002]), (0.002, [0.003, 0.004])]
