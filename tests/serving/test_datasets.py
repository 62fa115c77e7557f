"""Trace readers on small samples written here (the formats' real columns), workloads' arrivals."""

from __future__ import annotations

import json
import re
from argparse import Namespace

import numpy as np
import pytest

from spyre_emu.errors import ConfigError
from spyre_emu.serving import SchedulerConfig, datasets, simulate
from spyre_emu.serving.command import _lengths
from spyre_emu.serving.workload import arrivals, build, random_lengths


def test_sharegpt_counts_a_token_per_four_characters_and_skips_conversations_without_a_reply(tmp_path):
    path = tmp_path / "sg.json"
    path.write_text(json.dumps([
        {"id": "a", "conversations": [{"from": "human", "value": "x" * 41}, {"from": "gpt", "value": "y" * 8},
                                      {"from": "human", "value": "ignored"}]},
        {"id": "b", "conversations": [{"from": "human", "value": "alone"}]}]))
    assert datasets.load(path, "sharegpt") == [(11, 2, 0.0)]


def test_azure_trace_rows_with_times_from_the_first(tmp_path):
    path = tmp_path / "azure.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n"
                    "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n")
    assert datasets.load(path, "azure") == [(374, 44, 0.0), (396, 109, 4.314579)]


def test_burstgpt_rows_without_failed_requests(tmp_path):
    path = tmp_path / "burst.csv"
    path.write_text("Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                    "5,ChatGPT,472,18,490,Conversation log\n45,ChatGPT,1087,0,1087,Conversation log\n"
                    "118,GPT-4,417,276,693,Conversation log\n")
    assert datasets.load(path, "burstgpt") == [(472, 18, 0.0), (417, 276, 113.0)]


@pytest.mark.parametrize(("kind", "text", "where"), [
    ("sharegpt", "[{\"conversations\": 3}]", "$[0]: expected an object with a conversations list"),
    ("sharegpt", "{", "not JSON"),
    ("azure", "TIMESTAMP,ContextTokens\n1,2\n", "header: expected the columns TIMESTAMP, ContextTokens, "
     "GeneratedTokens; missing GeneratedTokens"),
    ("burstgpt", "Timestamp,Request tokens,Response tokens\n1,x,3\n", "line 2: expected a time and two token counts"),
    ("burstgpt", "Timestamp,Request tokens,Response tokens\n", "no usable requests"),
])
def test_a_bad_trace_is_one_error_naming_the_file_and_place(tmp_path, kind, text, where):
    path = tmp_path / "trace"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(where)) as err:
        datasets.load(path, kind)
    assert str(path) in str(err.value)


def test_gamma_gaps_have_the_rate_as_mean_and_burstiness_as_shape():
    """Gamma(k, 1/(k r)) has mean 1/r and variance 1/(k r²): the squared coefficient of variation is 1/k."""
    for k in (0.25, 1.0, 4.0):
        gaps = np.diff(arrivals(20001, 5.0, k, np.random.default_rng(0)))
        assert gaps.mean() == pytest.approx(0.2, rel=0.05)
        assert gaps.var() / gaps.mean() ** 2 == pytest.approx(1 / k, rel=0.1)
    assert arrivals(3, float("inf"), 1.0, np.random.default_rng(0)) == [0.0, 0.0, 0.0]


def test_random_lengths_stay_in_their_range():
    rows = random_lengths(1000, 100, 10, 0.5, np.random.default_rng(1))
    assert {p for p, _ in rows} == set(range(50, 151))
    assert min(o for _, o in rows) == 5
    assert max(o for _, o in rows) == 15
    assert random_lengths(3, 7, 2, 0.0, np.random.default_rng(1)) == [(7, 2)] * 3


def test_a_trace_gives_num_prompts_rows_drawn_with_the_seed(tmp_path):
    path = tmp_path / "burst.csv"
    path.write_text("Timestamp,Request tokens,Response tokens\n0,100,1\n1,101,2\n2,102,3\n")
    args = Namespace(dataset_path=str(path), dataset_name="burstgpt", num_prompts=5)
    rows = _lengths(args, np.random.default_rng(0))
    assert rows == _lengths(args, np.random.default_rng(0))
    assert len(rows) == 5
    assert set(rows) <= {(100, 1), (101, 2), (102, 3)}  # 5 from 3: drawn with replacement


def test_a_shared_prefix_is_prepended_and_its_chunks_cached():
    requests = build([(100, 1), (100, 1)], [0.0, 1.0], prefix_tokens=1024)
    assert [(r.prompt_tokens, r.prefix_id, r.prefix_tokens) for r in requests] == [(1124, 0, 1024)] * 2
    run = simulate(requests, SchedulerConfig(), lambda shape: 1000.0)
    assert [(s.shape.tokens, s.requests) for s in run.steps] == [(512, (0,)), (512, (0,)), (128, (0,)), (128, (1,))]
