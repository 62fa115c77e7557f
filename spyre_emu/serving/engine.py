"""The serving run in simpy: clients send requests, the engine runs one step at a time, each step
taking the time its pricer gives for its shape.

Processes: one client per request (it waits for its send time, then for a free slot when
``max_concurrency`` caps the requests in flight, as vllm bench serve's semaphore does) and the
engine (asks the scheduler for the next step, holds the card for the step's time, applies it;
sleeps only when the scheduler has nothing to do). simpy's clock counts whole nanoseconds (step
prices are rounded to them), so times add exactly; records give seconds. Same-time events go in
simpy's order (time, then scheduling order), so a seed gives the same run every time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import simpy

from .scheduler import Scheduler, SchedulerConfig
from .steps import Pricer, StepShape
from .workload import Request

NS = 1_000_000_000  # simpy time units per second


@dataclass
class RequestRecord:
    """One request as its client saw it: sent, each token's arrival, or the engine's refusal."""

    request: Request
    sent_s: float = 0.0
    token_s: list[float] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class StepRecord:
    kind: str
    shape: StepShape
    requests: tuple[int, ...]
    start_s: float
    end_s: float
    kv_used_blocks: int  # after the step
    volume: int  # decode: batch × longest sequence (unpadded keys)


@dataclass
class Run:
    config: SchedulerConfig
    requests: list[RequestRecord]
    steps: list[StepRecord]


def simulate(requests: list[Request], config: SchedulerConfig, price: Pricer, max_concurrency: int | None = None,
             on_done: Callable[[], None] | None = None) -> Run:
    """Serve ``requests`` (each sent at its ``arrival_s``) and record every step and token."""
    env = simpy.Environment()
    scheduler = Scheduler(config)
    records = {r.id: RequestRecord(r) for r in requests}
    steps: list[StepRecord] = []
    finished: dict[int, simpy.Event] = {}
    wake = [env.event()]
    slots = simpy.Resource(env, capacity=max_concurrency) if max_concurrency else None

    def client(request: Request):
        yield env.timeout(round(request.arrival_s * NS))
        slot = slots.request() if slots else None
        if slot is not None:
            yield slot
        record = records[request.id]
        record.sent_s = env.now / NS
        record.error = scheduler.refusal(request)
        if record.error is None:
            finished[request.id] = env.event()
            scheduler.add(request)
            if not wake[0].triggered:
                wake[0].succeed()
            yield finished[request.id]
        if slot is not None:
            slots.release(slot)
        if on_done:
            on_done()

    def engine():
        while True:
            step = scheduler.next_step()
            if step is None:
                wake[0] = env.event()
                yield wake[0]
                continue
            start = env.now
            yield env.timeout(max(1, round(price(step.shape) * 1000)))
            got, done = scheduler.finish(step)
            for rid in got:
                records[rid].token_s.append(env.now / NS)
            steps.append(StepRecord(step.kind, step.shape, step.requests, start / NS, env.now / NS,
                                    scheduler.used_blocks(), step.volume))
            for rid in done:
                finished[rid].succeed()

    clients = [env.process(client(r)) for r in requests]
    env.process(engine())
    env.run(until=simpy.AllOf(env, clients))
    return Run(config, [records[r.id] for r in requests], steps)
