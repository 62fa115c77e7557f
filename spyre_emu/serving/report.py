"""A serving run for people: vllm bench serve's text block, the JSON result, a Perfetto timeline
(the card's steps as slices, every request as a track) and plots (latency CDFs; KV cache and
batch over time; throughput and latency against the request rate when several rates ran)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..results.chrome import complete_event, metadata
from .engine import Run
from .metrics import METRICS, per_request

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TITLES = {"ttft": ("TTFT", "Time to First Token"), "tpot": ("TPOT", "Time per Output Token (excl. 1st token)"),
          "itl": ("ITL", "Inter-token Latency"), "e2el": ("E2EL", "End-to-end Latency")}


def to_text(result: dict[str, Any]) -> str:
    """The block vllm bench serve prints, then what the card did."""
    rows = [("Traffic request rate:", result.get("request_rate", "")),
            ("Successful requests:", result["completed"]), ("Failed requests:", result["failed"]),
            ("Benchmark duration (s):", f"{result['duration']:.2f}"),
            ("Total input tokens:", result["total_input_tokens"]),
            ("Total generated tokens:", result["total_output_tokens"]),
            ("Request throughput (req/s):", f"{result['request_throughput']:.2f}")]
    if result["request_goodput"] is not None:
        rows.append(("Request goodput (req/s):", f"{result['request_goodput']:.2f}"))
    rows += [("Output token throughput (tok/s):", f"{result['output_throughput']:.2f}"),
             ("Total Token throughput (tok/s):", f"{result['total_token_throughput']:.2f}")]
    lines = [f"{' Serving Benchmark Result ':=^50}", *(f"{k:<40} {v:<10}" for k, v in rows)]
    for name in METRICS:
        short, header = TITLES[name]
        lines.append(f"{header:-^50}")
        for key, value in result.items():
            stat = key.removesuffix(f"_{name}_ms")
            if key.endswith(f"_{name}_ms") and stat != "std":
                label = stat.capitalize() if stat in ("mean", "median") else stat.upper()
                lines.append(f"{f'{label} {short} (ms):':<40} {value:<10.2f}")
    card = result["card"]
    lines += [f"{' Spyre card ':-^50}",
              f"{'Steps (prefill):':<40} {card['steps']} ({card['prefill_steps']})",
              f"{'Busy (s):':<40} {card['busy_s']:.2f}",
              f"{'Peak KV cache usage (%):':<40} {100 * max([u for _, u in card['kv_cache_usage']] or [0]):.2f}",
              f"{'Distinct step shapes priced:':<40} {len(card['step_prices_us'])}", "=" * 50]
    return "\n".join(lines)


def to_json(results: list[dict[str, Any]]) -> bytes:
    """One result as vllm bench serve writes it; several (one per rate) as a list."""
    return (json.dumps(results[0] if len(results) == 1 else results, indent=1) + "\n").encode()


def timeline(run: Run) -> dict[str, Any]:
    """Chrome trace events in µs: process 1 the card (steps, KV blocks, batch size), process 2 the
    requests, one track each: waiting, prefill (to the first token), decode (to the last)."""
    us = lambda s: round(s * 1e6, 4)  # noqa: E731  (chrome.complete_event takes a time converter)
    events = [metadata(1, "process_name", "Spyre card"), metadata(1, "thread_name", "steps"),
              metadata(2, "process_name", "requests")]
    first_step: dict[int, float] = {}
    for s in run.steps:
        name = (f"prefill {s.shape.tokens} tokens, tkv {s.shape.tkv}" if s.kind == "prefill"
                else f"decode x{s.shape.batch}, tkv {s.shape.tkv}")
        events.append(complete_event(1, 0, name, s.kind, s.start_s, s.end_s, us, {"requests": list(s.requests)}))
        events.append({"ph": "C", "name": "KV blocks used", "pid": 1, "ts": us(s.end_s),
                       "args": {"blocks": s.kv_used_blocks}})
        events.append({"ph": "C", "name": "decode batch", "pid": 1, "ts": us(s.start_s),
                       "args": {"sequences": s.shape.batch if s.kind == "decode" else 0}})
        for rid in s.requests:
            first_step.setdefault(rid, s.start_s)
    for r in run.requests:
        rid = r.request.id
        events.append(metadata(2, "thread_name", f"request {rid}", tid=rid))
        if r.error is not None:
            continue
        phases = [("waiting", r.sent_s, first_step[rid]), ("prefill", first_step[rid], r.token_s[0]),
                  ("decode", r.token_s[0], r.token_s[-1])]
        events += [complete_event(2, rid, name, name, a, b, us, {}) for name, a, b in phases if b > a]
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def latency_cdf(runs: list[tuple[str, Run]]) -> Figure:
    """CDF of TTFT, ITL and E2EL (ms), one line per run."""
    from matplotlib.figure import Figure  # noqa: PLC0415 -- matplotlib loads only when a plot is drawn
    fig = Figure(figsize=(12, 3.6), layout="constrained")
    axes = fig.subplots(1, 3)
    for ax, name in zip(axes, ("ttft", "itl", "e2el"), strict=True):
        for label, run in runs:
            rows = [per_request(r) for r in run.requests if r.error is None]
            values = sorted(1000 * v for row in rows for v in (row[name] if name == "itl" else [row[name]]))
            ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post", label=label)
        ax.set(xlabel=f"{TITLES[name][0]} (ms)", ylabel="share of " + ("tokens" if name == "itl" else "requests"),
               title=TITLES[name][1])
        ax.grid(alpha=0.3)
    axes[0].legend()
    return fig


def card_over_time(run: Run) -> Figure:
    """KV cache usage (share of the card's blocks) and the decode batch, step by step."""
    from matplotlib.figure import Figure  # noqa: PLC0415 -- matplotlib loads only when a plot is drawn
    fig = Figure(figsize=(10, 4.4), layout="constrained")
    kv, batch = fig.subplots(2, 1, sharex=True)
    ends = [s.end_s for s in run.steps]
    kv.step(ends, [100 * s.kv_used_blocks / run.config.kv_blocks for s in run.steps], where="post")
    kv.set(ylabel="KV cache used (%)")
    decodes = [s for s in run.steps if s.kind == "decode"]
    batch.plot([s.start_s for s in decodes], [s.shape.batch for s in decodes], ".", markersize=2)
    batch.set(xlabel="time (s)", ylabel="decode batch")
    for ax in (kv, batch):
        ax.grid(alpha=0.3)
    return fig


def throughput_vs_rate(results: list[dict[str, Any]]) -> Figure:
    """Output throughput, and p50/p99 TTFT and ITL, against the request rate."""
    from matplotlib.figure import Figure  # noqa: PLC0415 -- matplotlib loads only when a plot is drawn
    fig = Figure(figsize=(10, 3.6), layout="constrained")
    left, right = fig.subplots(1, 2)
    rates = [r["request_rate"] for r in results]
    left.plot(rates, [r["output_throughput"] for r in results], "o-")
    left.set(xlabel="request rate (req/s)", ylabel="output tokens/s", title="Throughput")
    styles = {"median_ttft_ms": "o-", "p99_ttft_ms": "o--", "median_itl_ms": "s-", "p99_itl_ms": "s--"}
    for key, style in styles.items():
        if key in results[0]:
            right.plot(rates, [r[key] for r in results], style, label=key.removesuffix("_ms"))
    right.set(xlabel="request rate (req/s)", ylabel="ms", yscale="log", title="Latency")
    right.legend()
    for ax in (left, right):
        ax.grid(alpha=0.3)
    return fig
