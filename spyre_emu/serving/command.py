"""``spyre-emu serve``: vllm bench serve's options (same names where vLLM has them), one run per
request rate, the text block, and the files asked for, written only after every run finished.

Step prices come from the torch front end (spyre_emu.frontend.serving), imported here only when
the command runs, so the simulator itself never imports torch.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

from ..config import load_machine
from ..errors import ConfigError
from ..files import distinct_outputs, write_all
from ..host import load_host
from . import datasets, report, workload
from .engine import Run, simulate
from .metrics import card_series, summarize
from .models import kv_blocks, preset
from .scheduler import SchedulerConfig
from .steps import Pricer, StepShape, memoized

DATASETS = ("random", "sharegpt", "burstgpt", "azure")
SLOS = ("ttft", "tpot", "e2el")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="simulate vLLM serving a model on Spyre (vllm bench serve's options)")
    p.add_argument("--model", required=True, help="granite-3.3-8b, llama-3.1-8b, or module:attr (docs/serving.md)")
    p.add_argument("--num-prompts", type=int, default=1000, help="requests per run (default 1000)")
    p.add_argument("--request-rate", type=float, nargs="+", default=[math.inf], metavar="RATE",
                   help="requests/s; several: one run each (default inf: all at once)")
    p.add_argument("--burstiness", type=float, default=1.0, help="Gamma shape of the gaps (1: Poisson)")
    p.add_argument("--max-concurrency", type=int, help="at most this many requests in flight")
    p.add_argument("--dataset-name", choices=DATASETS, default="random")
    p.add_argument("--dataset-path", help="ShareGPT JSON, Azure LLM inference trace CSV or BurstGPT CSV")
    p.add_argument("--random-input-len", type=int, default=1024)
    p.add_argument("--random-output-len", type=int, default=128)
    p.add_argument("--random-range-ratio", type=float, default=0.0)
    p.add_argument("--random-prefix-len", type=int, default=0, help="tokens every prompt shares (prefix caching)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--tensor-parallel-size", type=int, default=1)
    p.add_argument("--max-model-len", type=int, default=3072)
    p.add_argument("--max-num-seqs", type=int, default=16)
    p.add_argument("--max-num-batched-tokens", type=int, default=512, help="the prefill chunk (multiple of 64)")
    p.add_argument("--max-batch-tkv", type=int, default=131072, help="VLLM_DT_MAX_BATCH_TKV_LIMIT")
    p.add_argument("--no-enable-prefix-caching", action="store_true")
    p.add_argument("--metric-percentiles", default="99", help="comma-separated percentiles (default 99)")
    p.add_argument("--quiet", action="store_true", help="do not print the results")
    p.add_argument("--goodput", nargs="+", default=[], metavar="KEY:MS", help="SLOs, e.g. ttft:500 tpot:50")
    p.add_argument("--config", help="machine TOML (default: configs/spyre.toml)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a config value")
    p.add_argument("--json", metavar="OUT", help="write the result (a list when several rates ran)")
    p.add_argument("--trace", metavar="OUT", help="write a Perfetto timeline of the (last) run")
    p.add_argument("--plot-cdf", metavar="OUT", help="latency CDFs (.png, .svg, .pdf)")
    p.add_argument("--plot-card", metavar="OUT", help="KV cache usage and decode batch over time (last run)")
    p.add_argument("--plot-rates", metavar="OUT", help="throughput and latency against the request rate")


def _check(args: argparse.Namespace) -> None:
    positive = ("num_prompts", "max_model_len", "max_num_seqs", "max_num_batched_tokens", "max_batch_tkv",
                "tensor_parallel_size", "max_concurrency")
    for name in positive:
        value = getattr(args, name)
        if value is not None and value < 1:
            raise ConfigError(f"must be at least 1, got {value}", None, "--" + name.replace("_", "-"))
    if args.max_num_batched_tokens % 64:
        raise ConfigError("must be a multiple of 64 (the KV block)", None, "--max-num-batched-tokens")
    if args.random_prefix_len < 0:
        raise ConfigError("must be at least 0", None, "--random-prefix-len")
    if args.seed < 0:  # numpy's generators take any whole number from 0 up
        raise ConfigError(f"must be at least 0, got {args.seed}", None, "--seed")
    if ":" not in args.model:
        preset(args.model)
    cards = load_host().drawer.max_cards
    if args.tensor_parallel_size > cards:
        raise ConfigError(f"a drawer holds at most {cards} cards, got {args.tensor_parallel_size}", None,
                          "--tensor-parallel-size")
    if args.plot_rates and len(args.request_rate) < 2:
        raise ConfigError("needs two or more --request-rate values", None, "--plot-rates")
    if (args.dataset_name == "random") != (args.dataset_path is None):
        raise ConfigError("a --dataset-path needs --dataset-name sharegpt, burstgpt or azure, and they need a path",
                          None, "--dataset-path")
    distinct_outputs({f"--{name.replace('_', '-')}": getattr(args, name)
                      for name in ("json", "trace", "plot_cdf", "plot_card", "plot_rates")},
                     {"--dataset-path": args.dataset_path, "--config": args.config})


def _percentiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(p) for p in text.split(","))
    except ValueError:
        values = ()
    if not values or not all(0 < p < 100 for p in values):
        raise ConfigError(f"expected comma-separated numbers in (0, 100), got {text!r}", None, "--metric-percentiles")
    return values


def _slos(items: list[str]) -> dict[str, float]:
    slos = {}
    for item in items:
        key, _, value = item.partition(":")
        try:
            slos[key] = float(value)
        except ValueError:
            key = ""
        if key not in SLOS or not slos[key] > 0:  # NaN too
            raise ConfigError(f"expected KEY:MS with KEY one of {', '.join(SLOS)}, got {item!r}", None, "--goodput")
    return slos


def _lengths(args: argparse.Namespace, rng: np.random.Generator) -> list[tuple[int, int]]:
    if args.dataset_path is None:
        return workload.random_lengths(args.num_prompts, args.random_input_len, args.random_output_len,
                                       args.random_range_ratio, rng)
    rows = datasets.load(Path(args.dataset_path), args.dataset_name)
    picks = rng.choice(len(rows), size=args.num_prompts, replace=args.num_prompts > len(rows))
    return [rows[i][:2] for i in picks]


def _pricer(args: argparse.Namespace):
    try:
        serving = importlib.import_module("spyre_emu.frontend.serving")
    except ImportError as exc:
        raise ConfigError(f"step prices need the torch front end: {exc}", None, "--model") from None
    model = serving.load_model(args.model)
    return model, serving.StepPricer(model, args.config, tuple(args.set))


def _shown(price: Pricer, bar: Any) -> Pricer:
    """``price``, telling the bar about each new shape before its (long) first pricing."""
    def shown(shape: StepShape) -> float:
        if shape not in price.prices:  # type: ignore[attr-defined]
            bar.set_postfix_str(f"pricing step shape {len(price.prices) + 1}: {shape.kind} "  # type: ignore[attr-defined]
                                f"x{shape.batch}, {shape.tokens} tokens, tkv {shape.tkv}")
        return price(shape)
    return shown


def serve(args: argparse.Namespace) -> None:
    _check(args)
    percentiles, slos = _percentiles(args.metric_percentiles), _slos(args.goodput)
    machine = load_machine(args.config, args.set)
    lengths = _lengths(args, np.random.default_rng(args.seed))
    sends = [workload.arrivals(args.num_prompts, rate, args.burstiness, np.random.default_rng((args.seed, 1)))
             for rate in args.request_rate]  # the same gaps, scaled, at every rate
    model, pricer = _pricer(args)
    config = SchedulerConfig(args.max_num_seqs, args.max_model_len, args.max_num_batched_tokens, 64,
                             args.max_batch_tkv, kv_blocks(model.weight_bytes(), model.kv_bytes_per_token(),
                                                           machine.dram.size_bytes, 64, args.tensor_parallel_size),
                             not args.no_enable_prefix_caching, args.tensor_parallel_size)
    price = memoized(pricer)
    runs: list[tuple[str, Run]] = []
    results: list[dict[str, Any]] = []
    from tqdm import tqdm  # noqa: PLC0415  (a bar on a terminal only, as the sweep's)
    with tqdm(total=args.num_prompts * len(args.request_rate), unit="req", disable=None, file=sys.stderr,
              leave=False) as bar:
        for rate, times in zip(args.request_rate, sends, strict=True):
            run = simulate(workload.build(lengths, times, args.random_prefix_len), config, _shown(price, bar),
                           args.max_concurrency, lambda: bar.update(1))
            result = {"model": args.model, "request_rate": rate if math.isfinite(rate) else "inf",
                      "burstiness": args.burstiness, "max_concurrency": args.max_concurrency,
                      **summarize(run, percentiles, slos or None)}
            used = dict.fromkeys(s.shape for s in run.steps)  # this run's shapes, in the order first run
            result["card"] = {**card_series(run), "kv_blocks": config.kv_blocks,
                              "step_prices_us": [[*shape[:3], price(shape)] for shape in used]}
            runs.append((f"{rate:g} req/s", run))
            results.append(result)
    for result in results:
        if not args.quiet:
            print(report.to_text(result))
    _write(args, runs, results)


def _write(args: argparse.Namespace, runs: list[tuple[str, Run]], results: list[dict[str, Any]]) -> None:
    from ..results.plots import image_bytes  # noqa: PLC0415 -- matplotlib loads only when a plot is drawn
    outputs = []
    if args.json:
        outputs.append((Path(args.json), report.to_json(results)))
    if args.trace:
        outputs.append((Path(args.trace), json.dumps(report.timeline(runs[-1][1])).encode()))
    if args.plot_cdf:
        outputs.append((Path(args.plot_cdf), image_bytes(report.latency_cdf(runs), args.plot_cdf)))
    if args.plot_card:
        outputs.append((Path(args.plot_card), image_bytes(report.card_over_time(runs[-1][1]), args.plot_card)))
    if args.plot_rates:
        outputs.append((Path(args.plot_rates), image_bytes(report.throughput_vs_rate(results), args.plot_rates)))
    write_all(outputs)
