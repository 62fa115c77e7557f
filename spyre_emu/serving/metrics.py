"""A run's results under ``vllm bench serve``'s names and JSON keys, plus what the card saw:
KV cache usage and batch size over time, and the step shapes it priced.

Definitions as vLLM's benchmark computes them: TTFT from sending to the first token; TPOT per
request (E2EL − TTFT) / (output tokens − 1), for requests with more than one output token; ITL
every gap between consecutive tokens of a request, all requests together; E2EL from sending to the
last token; throughputs over the duration (time 0 to the last request's end). Goodput counts the
requests within every SLO given (ms), and is None without SLOs.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .engine import RequestRecord, Run

METRICS = ("ttft", "tpot", "itl", "e2el")


def per_request(record: RequestRecord) -> dict[str, Any]:
    """ttft, tpot, e2el (s) and the itls (s) of one completed request."""
    t, sent = record.token_s, record.sent_s
    out = len(t)
    return {"ttft": t[0] - sent, "e2el": t[-1] - sent, "itl": list(np.diff(t)),
            "tpot": (t[-1] - t[0]) / (out - 1) if out > 1 else None}


def _percentile_key(p: float) -> str:
    return str(int(p)) if int(p) == p else str(p)


def summarize(run: Run, percentiles: tuple[float, ...] = (99.0,), goodput: dict[str, float] | None = None
              ) -> dict[str, Any]:
    done = [r for r in run.requests if r.error is None]
    rows = [per_request(r) for r in done]
    duration = max([r.token_s[-1] for r in done] + [r.sent_s for r in run.requests])
    total_in = sum(r.request.prompt_tokens for r in done)
    total_out = sum(len(r.token_s) for r in done)
    result: dict[str, Any] = {
        "duration": duration, "completed": len(done), "failed": len(run.requests) - len(done),
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(done) / duration if duration else 0.0,
        "request_goodput": _goodput(rows, goodput) / duration if goodput and duration else None,
        "output_throughput": total_out / duration if duration else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration else 0.0,
    }
    for name in METRICS:
        values = [v for row in rows for v in (row[name] if name == "itl" else [row[name]]) if v is not None]
        ms = np.array(values or [0.0]) * 1000.0
        result[f"mean_{name}_ms"] = float(np.mean(ms))
        result[f"median_{name}_ms"] = float(np.median(ms))
        result[f"std_{name}_ms"] = float(np.std(ms))
        for p in percentiles:
            result[f"p{_percentile_key(p)}_{name}_ms"] = float(np.percentile(ms, p))
    return result


def _goodput(rows: list[dict[str, Any]], slo_ms: dict[str, float]) -> int:
    """Requests whose ttft, tpot and e2el are all within the SLOs given (a one-token request's tpot is 0)."""
    return sum(all(((row[k] or 0.0) * 1000.0) <= v for k, v in slo_ms.items()) for row in rows)


def card_series(run: Run) -> dict[str, Any]:
    """Per step (at its end): KV blocks in use as a share of the card's, and the batch size."""
    kv = run.config.kv_blocks
    return {"kv_cache_usage": [[s.end_s, s.kv_used_blocks / kv] for s in run.steps],
            "batch_size": [[s.end_s, s.shape.batch] for s in run.steps],
            "steps": len(run.steps), "prefill_steps": sum(s.kind == "prefill" for s in run.steps),
            "busy_s": sum(s.end_s - s.start_s for s in run.steps)}
