"""vLLM serving on Spyre, request by request: workloads, the sendnn-inference scheduler, a simpy run
whose steps are priced by an injected pricer, and vllm bench serve's metrics (docs/serving.md)."""

from .engine import Run, simulate
from .metrics import card_series, summarize
from .scheduler import SchedulerConfig
from .steps import StepShape, memoized
from .workload import Request

__all__ = ["Request", "Run", "SchedulerConfig", "StepShape", "card_series", "memoized", "simulate", "summarize"]
