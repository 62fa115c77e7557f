"""Streams and events with the card's semantics (the host model, spyre_emu.host): the card runs one
kernel at a time; a stream's work runs in issue order; an event marks the end of a stream's work so
far, and waiting on it holds the host until that work is done (Spyre has no device-side event
across streams), so everything issued after the wait, on any stream, comes later.
``elapsed_time`` is simulated time."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterator

from spyre_emu.errors import SpyreEmuError

from . import state

_EVENTS = itertools.count()


class Stream:
    """A new stream, or (``stream_id``) an existing one; ``device`` and ``priority`` are taken as
    torch.cuda.Stream takes them and change nothing (one card, one priority)."""

    def __init__(self, device: object = None, priority: int = 0, *, stream_id: int | None = None):
        dev = state.current()
        if stream_id is None:
            stream_id, dev.streams = dev.streams, dev.streams + 1
        self.stream_id = stream_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.stream_id == self.stream_id

    def __hash__(self) -> int:
        return hash(self.stream_id)

    def __repr__(self) -> str:
        return f"<spyre_emu Stream {self.stream_id}>"

    def record_event(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        event.wait(self)

    def wait_stream(self, other: Stream) -> None:
        self.wait_event(other.record_event())

    def synchronize(self) -> None:
        self.record_event().synchronize()

    def query(self) -> bool:
        """Always done: simulated work takes no wall time."""
        return True


class Event:
    """torch.cuda.Event's arguments are taken and change nothing: every event is timed (simulated time)."""

    def __init__(self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        self.name = f"event{next(_EVENTS)}"
        self.index: int | None = None   # the record's position in the device's log

    def record(self, stream: Stream | None = None) -> None:
        dev = state.current()
        stream_id = stream.stream_id if stream is not None else dev.stream
        self.index = len(dev.log.entries)
        dev.log.record(self.name, stream_id)

    def wait(self, stream: Stream | None = None) -> None:
        state.current().log.wait(self._recorded())

    def synchronize(self) -> None:
        self.wait()

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: Event) -> float:
        """Milliseconds of simulated time from this event to ``end``."""
        log = state.current().log
        return (log.event_us(end._index()) - log.event_us(self._index())) / 1000.0

    def _recorded(self) -> str:
        self._index()
        return self.name

    def _index(self) -> int:
        if self.index is None:
            raise SpyreEmuError(f"{self.name} was never recorded: call record() first")
        return self.index


def current_stream(device: object = None) -> Stream:
    return Stream(stream_id=state.current().stream)


def default_stream(device: object = None) -> Stream:
    return Stream(stream_id=0)


def set_stream(s: Stream) -> None:
    state.current().stream = s.stream_id


@contextlib.contextmanager
def stream(s: Stream | None) -> Iterator[None]:
    """Work issued inside the block goes to ``s``."""
    dev = state.current()
    before = dev.stream
    if s is not None:
        dev.stream = s.stream_id
    try:
        yield
    finally:
        dev.stream = before
