"""The run for people: vllm bench serve's text block, the JSON, the Perfetto timeline, the plots."""

from __future__ import annotations

import json

from spyre_emu.results.plots import image_bytes
from spyre_emu.serving import SchedulerConfig, card_series, simulate, summarize
from spyre_emu.serving.report import card_over_time, latency_cdf, throughput_vs_rate, timeline, to_json, to_text
from spyre_emu.serving.workload import Request


def _run():
    """As in test_metrics: P0 [0,1] D0 [1,2] P1 [2,3] D0 [3,4] ms."""
    return simulate([Request(0, 0.0, 64, 3), Request(1, 0.0, 64, 1)], SchedulerConfig(kv_blocks=10),
                    lambda s: 1000.0)


def _result(run, rate=1.0):
    return {"request_rate": rate, **summarize(run), "card": {**card_series(run), "step_prices_us": [[1, 64, 64, 1e3]]}}


def test_text_has_vllms_lines_and_the_card():
    text = to_text(_result(_run()))
    for line in ("Successful requests:                     2", "Benchmark duration (s):                  0.00",
                 "Mean TTFT (ms):                          2.00", "P99 ITL (ms):                            1.99",
                 "Steps (prefill):                         4 (2)", "Peak KV cache usage (%):                 20.00"):
        assert line in text
    assert "goodput" not in text


def test_json_is_one_result_or_a_list():
    run = _run()
    assert json.loads(to_json([_result(run)]))["completed"] == 2
    assert [r["request_rate"] for r in json.loads(to_json([_result(run, 1.0), _result(run, 2.0)]))] == [1.0, 2.0]


def test_timeline_has_the_steps_and_a_track_per_request():
    events = timeline(_run())["traceEvents"]
    steps = [(e["name"], e["ts"], e["dur"]) for e in events if e["pid"] == 1 and e["ph"] == "X"]
    assert steps == [("prefill 64 tokens, tkv 64", 0.0, 1000.0), ("decode x1, tkv 128", 1000.0, 1000.0),
                     ("prefill 64 tokens, tkv 64", 2000.0, 1000.0), ("decode x1, tkv 128", 3000.0, 1000.0)]
    tracks = [(e["tid"], e["name"], e["ts"], e["dur"]) for e in events if e["pid"] == 2 and e["ph"] == "X"]
    assert tracks == [(0, "prefill", 0.0, 1000.0), (0, "decode", 1000.0, 3000.0),
                      (1, "waiting", 0.0, 2000.0), (1, "prefill", 2000.0, 1000.0)]


def test_plots_draw():
    run = _run()
    assert image_bytes(latency_cdf([("1 req/s", run)]), "a.png").startswith(b"\x89PNG")
    assert image_bytes(card_over_time(run), "c.png").startswith(b"\x89PNG")
    assert image_bytes(throughput_vs_rate([_result(run, 1.0), _result(run, 2.0)]), "b.svg").startswith(b"<?xml")
