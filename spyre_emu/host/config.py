"""The host model's configuration (configs/host.toml): the runtime's per-launch and per-copy costs,
the drawer's switch and collective costs and the host CPU's rate for CPU fallbacks, read and checked
as the card's config is (config/load.py)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from ..config.load import load_config
from ..errors import ConfigError

DEFAULT_HOST = Path(__file__).resolve().parents[2] / "configs" / "host.toml"


@dataclass(frozen=True)
class Runtime:
    """Host-side costs of the runtime (µs) and the card's compute queue."""

    deserialize_us: float
    prepare_us: float
    graph_us: float
    patch_us: float
    completion_us: float
    compute_queue_entries: int


@dataclass(frozen=True)
class Drawer:
    """Cards behind one PCIe switch; collectives through host memory (spyreccl)."""

    max_cards: int
    uplink_gbytes_per_s: float
    switch_latency_us: float
    collective_fixed_us: float
    step_latency_us: float


@dataclass(frozen=True)
class Cpu:
    """The host CPU that runs the ops the card does not (the front end's CPU fallbacks)."""

    gflops: float
    gbytes_per_s: float
    op_us: float

    def op_time_us(self, flops: int, nbytes: int) -> float:
        """One op: its dispatch, then the longer of its arithmetic and its memory traffic (a roofline)."""
        return self.op_us + max(flops / (self.gflops * 1e3), nbytes / (self.gbytes_per_s * 1e3))


@dataclass(frozen=True)
class Host:
    runtime: Runtime
    drawer: Drawer
    cpu: Cpu


def load_host(path: str | Path | None = None, overrides: list[str] | tuple[str, ...] = ()) -> Host:
    """``configs/host.toml`` (or ``path``) with ``KEY=VALUE`` overrides; every value must be positive
    (costs may be 0)."""
    host, blame = load_config(Host, Path(path) if path else DEFAULT_HOST, overrides)
    for part in fields(host):
        section = getattr(host, part.name)
        for f in fields(section):
            value, key = getattr(section, f.name), f"{part.name}.{f.name}"
            counts = f.name in ("compute_queue_entries", "max_cards", "gflops") or f.name.endswith("gbytes_per_s")
            if value < 0 or (counts and value <= 0):
                raise ConfigError(f"must be {'positive' if counts else 'at least 0'}, got {value}", blame(key), key)
    return host
