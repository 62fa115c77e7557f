"""The host and the drawer: a simpy model of the runtime (launches, copies, streams, events, the
card's queues) and of collectives between up to 8 cards, driven by the card model's kernel times.
See docs/host.md."""

from .collectives import collective_us, plan
from .config import Host, load_host
from .runtime import Collective, Copy, Launch, Record, Timeline, Wait, simulate_host, simulate_ranks

__all__ = ["Collective", "Copy", "Host", "Launch", "Record", "Timeline", "Wait", "collective_us", "load_host",
           "plan", "simulate_host", "simulate_ranks"]
