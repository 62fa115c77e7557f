"""The host runtime in simpy: one host thread issues launches, copies, events and collectives, in order.

What it models (docs/host.md):
- **The host thread** runs the program's calls one after another. A program's first launch
  deserializes and prepares it. After that, with graphs cached, a launch only patches addresses,
  queues the kernel and goes on. With graphs built on the launch path (sendnn's graph loader), every
  launch builds its graph again (``graph_us``) and the call returns only once the graph has run on
  the card, as the loader's LaunchKernel does (its time includes the compute: torch-spyre PR 1728).
  A copy on the graph path (transfers not cached) builds a graph the same way and waits for it too.
- **The card** runs one kernel at a time from a compute queue of ``compute_queue_entries``; a host
  that finds it full waits for a place. A kernel takes its simulated time on the card (from the
  numba engine, given: it starts with the firmware's dispatch, the card's ``launch.dispatch_cycles``),
  then the completion notice. Copies to and from the
  card have queues of their own (DMA in, DMA out) and share the drawer's PCIe uplink, one transfer
  per direction at a time.
- **Streams** keep their own work in order: an op starts only after the stream's previous op is done.
- **Events**: ``Record`` marks the end of a stream's work so far. The card has no device-side event
  across streams, so ``Wait`` holds the host thread until the event's work is done.
- **Collectives** are synchronous (spyreccl): the host waits for every member card's stream, then
  the collective moves its data through host memory (collectives.py) on the uplink.
- **Ranks.** A tensor-parallel job runs one host process per card (``simulate_ranks``): each rank's
  thread issues its own card's work, and a collective starts once every member rank has reached it
  (the k-th collective of each rank is the same call).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import simpy

from ..config import Machine
from ..errors import ConfigError
from .collectives import collective_us
from .config import Host


@dataclass(frozen=True)
class Launch:
    program: str
    card_us: float        # the kernel program's time on the card (the engine's report)
    stream: int = 0
    card: int = 0


@dataclass(frozen=True)
class Copy:
    direction: str        # "h2d" or "d2h"
    nbytes: int
    stream: int = 0
    card: int = 0


@dataclass(frozen=True)
class Record:
    event: str
    stream: int = 0
    card: int = 0


@dataclass(frozen=True)
class Wait:
    event: str


@dataclass(frozen=True)
class Collective:
    kind: str             # all_reduce, all_gather, reduce_scatter, broadcast, send_recv
    nbytes: int           # per card
    cards: tuple[int, ...]
    stream: int = 0


Op = Launch | Copy | Record | Wait | Collective


@dataclass(frozen=True)
class Span:
    """One op's time on its resource: what ran, where, when (µs)."""

    index: int
    what: str
    where: str            # "host", "card0.compute", "card0.dma_in", "drawer"
    start: float
    end: float


@dataclass
class Timeline:
    spans: list[Span] = field(default_factory=list)
    end_us: float = 0.0

    def busy_us(self, where: str) -> float:
        return sum(s.end - s.start for s in self.spans if s.where == where)


def simulate_host(ops: list[Op], host: Host, machine: Machine, cards: int = 1, cached_launches: bool = True,
                  cached_copies: bool = True, warm: bool = False) -> Timeline:
    """Run ``ops`` as the host issues them on ``cards`` cards; the timeline of every span. With
    ``cached_launches`` off, every launch builds its graph on the compute path and waits for it; with
    ``cached_copies`` off, every copy does so on the data path (IBM's "before"). ``warm``: every program was
    built by an earlier step (a serving loop's steady state), so cached launches only patch."""
    return _run([ops], host, machine, cards, cached_launches, cached_copies, warm)


def simulate_ranks(ranks: list[list[Op]], host: Host, machine: Machine, cached_launches: bool = True,
                   cached_copies: bool = True, warm: bool = False) -> Timeline:
    """One host process per card, as a tensor-parallel job runs: ``ranks[r]`` is what rank r issues,
    all of it on card r. Each rank builds its own launches; collectives meet across ranks. Host spans
    are on ``host.rank<r>``."""
    for r, ops in enumerate(ranks):
        for i, op in enumerate(ops):
            if r not in (getattr(op, "cards", None) or [getattr(op, "card", r)]):
                raise ConfigError(f"rank {r} issues work for another card", None, f"ranks[{r}][{i}]")
    return _run(ranks, host, machine, len(ranks), cached_launches, cached_copies, warm)


def _run(threads: list[list[Op]], host: Host, machine: Machine, cards: int, cached_launches: bool,
         cached_copies: bool, warm: bool) -> Timeline:
    if not 1 <= cards <= host.drawer.max_cards:
        raise ConfigError(f"a drawer holds 1 to {host.drawer.max_cards} cards, got {cards}", None, "--cards")
    env = simpy.Environment()
    model = _Model(env, host, machine, cards, cached_launches, cached_copies)
    if warm:
        model.built = {(t, op.program) for t, ops in enumerate(threads) for op in ops if isinstance(op, Launch)}
    model.threads = len(threads)
    for t, ops in enumerate(threads):
        env.process(model.host_thread(ops, t))
    env.run()
    model.timeline.end_us = env.now
    return model.timeline


@dataclass
class _Meeting:
    """A collective's members so far, and when it ends."""

    op: Collective
    arrived: int
    done: simpy.Event


class _Model:
    def __init__(self, env: simpy.Environment, host: Host, machine: Machine, cards: int, cached_launches: bool,
                 cached_copies: bool):
        self.env, self.host, self.machine, self.cards = env, host, machine, cards
        self.cached_launches, self.cached_copies = cached_launches, cached_copies
        self.threads = 1
        self.meetings: dict[tuple[int, tuple[int, ...]], _Meeting] = {}  # (k-th, members) -> the call
        rt = host.runtime
        self.queue = [simpy.Resource(env, rt.compute_queue_entries) for _ in range(cards)]
        self.compute = [simpy.Resource(env, 1) for _ in range(cards)]
        self.dma = {(c, d): simpy.Resource(env, 1) for c in range(cards) for d in ("h2d", "d2h")}
        self.uplink = {d: simpy.Resource(env, 1) for d in ("h2d", "d2h")}
        self.tail: dict[tuple[int, int], simpy.Event] = {}  # (card, stream) -> its last op's end on the card
        self.seen: dict[tuple[int, int], simpy.Event] = {}  # (card, stream) -> when the host learns of that end
        self.events: dict[str, simpy.Event] = {}
        self.built: set[tuple[int, str]] = set()   # (host thread, program) built so far
        self.timeline = Timeline()

    def host_thread(self, ops: list[Op], thread: int = 0):
        met: dict[tuple[int, ...], int] = {}
        for i, op in enumerate(ops):
            self._check(op, i)
            if isinstance(op, Record):
                self.events[op.event] = self._seen(op.card, op.stream)
            elif isinstance(op, Wait):
                if op.event not in self.events:
                    raise ConfigError(f"waits for event {op.event!r}, never recorded before", None, f"ops[{i}]")
                yield self.events[op.event]
            elif isinstance(op, Collective):
                mine = [c for c in op.cards if self.threads == 1 or c == thread]
                yield simpy.AllOf(self.env, [self._seen(c, op.stream) for c in mine])
                k = met[op.cards] = met.get(op.cards, -1) + 1
                yield self._meet(op, i, (k, op.cards))
            else:
                yield from self._build(op, i, thread)
                if isinstance(op, Launch):
                    place = self.queue[op.card].request()
                    yield place  # a full compute queue holds the host
                    self._then(op.card, op.stream, self._kernel(op, i, place))
                else:
                    self._then(op.card, op.stream, self._copy(op, i))
                if not (self.cached_launches if isinstance(op, Launch) else self.cached_copies):
                    yield self._seen(op.card, op.stream)  # the graph path returns once its graph has run

    def _check(self, op: Op, i: int) -> None:
        for card in getattr(op, "cards", None) or [getattr(op, "card", 0)]:
            if not 0 <= card < self.cards:
                raise ConfigError(f"card {card} is not in this drawer of {self.cards}", None, f"ops[{i}]")
        if isinstance(op, Copy) and op.direction not in ("h2d", "d2h"):
            raise ConfigError(f"direction must be h2d or d2h, got {op.direction!r}", None, f"ops[{i}]")

    def _tail(self, card: int, stream: int) -> simpy.Event:
        """When the stream's work so far ends on the card (now, if it has none)."""
        return self.tail.get((card, stream)) or self.env.timeout(0)

    def _seen(self, card: int, stream: int) -> simpy.Event:
        """When the host learns that the stream's work so far has ended."""
        return self.seen.get((card, stream)) or self.env.timeout(0)

    def _then(self, card: int, stream: int, work) -> None:
        """Start ``work`` (a generator of the op's time on the card) after the stream's previous op ends
        on the card; the host learns of its end ``completion_us`` later."""
        before, done = self._tail(card, stream), self.env.event()

        def ordered():
            yield before
            yield from work
            done.succeed()
            yield self.env.timeout(self.host.runtime.completion_us)
        self.tail[(card, stream)] = done
        self.seen[(card, stream)] = self.env.process(ordered())

    def _build(self, op: Launch | Copy, i: int, thread: int):
        rt = self.host.runtime
        if isinstance(op, Launch):
            first = (thread, op.program) not in self.built
            self.built.add((thread, op.program))
            built = rt.patch_us if self.cached_launches else rt.graph_us
            cost = rt.deserialize_us + rt.prepare_us if first else built
        else:
            cost = 0.0 if self.cached_copies else rt.graph_us
        if cost:
            where = "host" if self.threads == 1 else f"host.rank{thread}"
            yield from self._span(i, f"build {_name(op)}", where, cost)

    def _kernel(self, op: Launch, i: int, place):
        with self.compute[op.card].request() as engine:
            yield engine
            yield from self._span(i, op.program, f"card{op.card}.compute", op.card_us)
        self.queue[op.card].release(place)

    def _copy(self, op: Copy, i: int):
        with self.dma[(op.card, op.direction)].request() as unit, self.uplink[op.direction].request() as link:
            yield unit
            yield link
            yield from self._span(i, _name(op), f"card{op.card}.dma_{op.direction}", self.pcie_us(op.nbytes))

    def _meet(self, op: Collective, i: int, key: tuple[int, tuple[int, ...]]) -> simpy.Event:
        """Arrive at a collective; the last member to arrive starts it. What every member waits for."""
        meeting = self.meetings.setdefault(key, _Meeting(op, 0, self.env.event()))
        if meeting.op.kind != op.kind or meeting.op.nbytes != op.nbytes:
            raise ConfigError(f"ranks disagree on collective {key[0]} of cards {op.cards}: {meeting.op.kind} "
                              f"{meeting.op.nbytes} B against {op.kind} {op.nbytes} B", None, f"ops[{i}]")
        meeting.arrived += 1
        if meeting.arrived == (1 if self.threads == 1 else len(op.cards)):
            def run():
                yield from self._collective(op, i)
                meeting.done.succeed()
            self.env.process(run())
        return meeting.done

    def _collective(self, op: Collective, i: int):
        with self.uplink["h2d"].request() as up, self.uplink["d2h"].request() as down:
            yield up
            yield down
            us = collective_us(op.kind, op.nbytes, len(op.cards), self.host.drawer, self.pcie_us)
            yield from self._span(i, f"{op.kind} {op.nbytes} B x{len(op.cards)}", "drawer", us)

    def _span(self, i: int, what: str, where: str, us: float):
        start = self.env.now
        yield self.env.timeout(us)
        self.timeline.spans.append(Span(i, what, where, start, self.env.now))

    def pcie_us(self, nbytes: int) -> float:
        """One transfer between a card and the host: the card's link (``Machine.pcie_us``), plus the
        drawer's switch on the way."""
        return self.machine.pcie_us(nbytes) + self.host.drawer.switch_latency_us


def _name(op: Launch | Copy) -> str:
    return op.program if isinstance(op, Launch) else f"{op.direction} {op.nbytes} B"
