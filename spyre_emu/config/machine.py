"""What the card is: one frozen dataclass per hardware unit, filled from TOML.

Every field is in the unit its name says (``_cycles`` are core clock cycles,
``_bytes`` are bytes). Sources for the default values live in ``configs/spyre.toml``.
Each class's ``problems()`` lists impossible values as (key, message) pairs so the
loader can name the exact key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STICK_BYTES = 128  # the unit of every transfer on Spyre (torch-spyre, high confidence)
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "int32": 4, "fp8": 1, "int8": 1}

Problems = list[tuple[str, str]]
MAX_CYCLES_VALUE = 1 << 30  # any one latency or cost; keeps every sum of them far inside int64
PT_MODES = ("spyre", "plain")
DATAFLOWS = ("os", "ws", "is")  # output, weight (B), input (A) stationary: SCALE-Sim's three
MAX_ARRAY_SIDE = 1 << 16  # PE rows or columns; keeps a pass's cycle count far inside int64


def _cycle_values(unit: object) -> list[tuple[str, int]]:
    """Every ``*_cycles`` field of a unit, and the entries of its ``*_cycles`` tables."""
    out: list[tuple[str, int]] = []
    for key in unit.__dataclass_fields__:  # type: ignore[attr-defined]
        value = getattr(unit, key)
        if key.endswith("_cycles") and isinstance(value, int):
            out.append((key, value))
        elif key.endswith("_cycles") and isinstance(value, dict):
            out += [(f"{key}.{k}", v) for k, v in value.items()]
    return out


def _pow2(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


def _positive(obj: object, *names: str) -> Problems:
    return [(n, "must be > 0") for n in names if getattr(obj, n) <= 0]


def _non_negative(obj: object, *names: str) -> Problems:
    return [(n, "must be >= 0") for n in names if getattr(obj, n) < 0]


def _at_most(obj: object, **limits: int) -> Problems:
    """Upper bounds that keep the engine's preallocated arrays to a sane size."""
    return [(n, f"must be at most {limit}") for n, limit in limits.items() if getattr(obj, n) > limit]


def _powers_of_two(obj: object, *names: str) -> Problems:
    return [(n, "must be a power of two") for n in names if not _pow2(getattr(obj, n))]


@dataclass(frozen=True)
class Clock:
    ghz: float

    def problems(self) -> Problems:
        return _positive(self, "ghz")


@dataclass(frozen=True)
class Cores:
    count: int
    corelets: int

    def problems(self) -> Problems:
        bad = _positive(self, "count", "corelets")
        return bad + ([("corelets", "the unit program format has 2 corelets per core")]
                      if self.corelets != 2 else [])


@dataclass(frozen=True)
class PtArray:
    """``mode`` "spyre" times passes as Spyre's SIMD-systolic array (rows_per_pass, lanes, fill, drain);
    "plain" as a textbook pe_rows x pe_cols array of one-MAC PEs with ``dataflow`` (os, ws, is), as
    SCALE-Sim v3 times a GEMM (docs/decisions/plain-systolic.md); ``dataflow`` matters only there."""

    mode: str
    dataflow: str
    pe_rows: int
    pe_cols: int
    rows_per_pass: int
    cols_per_pass: int
    max_tile_rows: int   # rows of C a 2-D core computes at once; more are done in row blocks, B streamed for each
    split_k_corelets: int  # corelets whose arrays run the passes of a core whose K is split over cores (1 or 2)
    fill_cycles: int
    drain_cycles: int
    lanes: dict[str, int]

    def problems(self) -> Problems:
        bad = _positive(self, "pe_rows", "pe_cols", "rows_per_pass", "cols_per_pass", "max_tile_rows")
        bad += _non_negative(self, "fill_cycles", "drain_cycles")
        if self.split_k_corelets not in (1, 2):
            bad.append(("split_k_corelets", "must be 1 or 2 (a core has 2 corelets)"))
        bad += [(f"lanes.{d}", "must be a power of two") for d, n in self.lanes.items()
                if not _pow2(n)]
        bad += [(f"lanes.{d}", f"unknown dtype; expected one of {sorted(DTYPE_BYTES)}")
                for d in self.lanes if d not in DTYPE_BYTES]
        if "fp16" not in self.lanes and not self.plain:  # the reports' PT ideal cycles count fp16 MACs
            bad.append(("lanes.fp16", "missing: the PT array's fp16 lanes are required"))
        if self.mode not in PT_MODES:
            bad.append(("mode", f"must be one of {', '.join(PT_MODES)}"))
        if self.dataflow not in DATAFLOWS:
            bad.append(("dataflow", f"must be one of {', '.join(DATAFLOWS)}"))
        return bad + _at_most(self, pe_rows=MAX_ARRAY_SIDE, pe_cols=MAX_ARRAY_SIDE)

    @property
    def plain(self) -> bool:
        return self.mode == "plain"

    def macs_per_cycle(self, dtype: str) -> int:
        """Peak MACs per cycle of one corelet's array for ``dtype`` (a plain PE does one MAC a cycle)."""
        return self.pe_rows * self.pe_cols * (1 if self.plain else self.lanes[dtype])


@dataclass(frozen=True)
class Sfu:
    lanes_fp16: int
    latency_cycles: int
    cost_cycles: dict[str, int]

    def problems(self) -> Problems:
        bad = _positive(self, "lanes_fp16") + _non_negative(self, "latency_cycles")
        need = {"simple", "transcendental", "reduce"}
        bad += [(f"cost_cycles.{c}", "missing cost class") for c in sorted(need - set(self.cost_cycles))]
        bad += [(f"cost_cycles.{c}", "must be > 0") for c, v in self.cost_cycles.items() if v <= 0]
        return bad


@dataclass(frozen=True)
class Dma:
    max_burst_bytes: int
    max_inflight_bytes: int
    multicast_max_cores: int  # destinations one load may name (one DRAM read, a copy per core)
    piece_setup_cycles: int   # a load, store or send unit sets up each piece (contiguous run) this long

    def problems(self) -> Problems:
        bad = _powers_of_two(self, "max_burst_bytes", "max_inflight_bytes") + _non_negative(self, "piece_setup_cycles")
        if self.multicast_max_cores < 1:
            bad.append(("multicast_max_cores", "must be at least 1"))

        if self.max_burst_bytes < STICK_BYTES:
            bad.append(("max_burst_bytes", f"must be at least one stick ({STICK_BYTES} B)"))
        if self.max_inflight_bytes < self.max_burst_bytes:
            bad.append(("max_inflight_bytes", "must be at least max_burst_bytes"))
        return bad + _at_most(self, max_inflight_bytes=1 << 24, multicast_max_cores=1 << 10)


@dataclass(frozen=True)
class Fifo:
    depth_sticks: int

    def problems(self) -> Problems:
        return _positive(self, "depth_sticks") + _at_most(self, depth_sticks=1 << 20)


@dataclass(frozen=True)
class Lx:
    size_bytes: int
    port_bytes_per_cycle: int

    def problems(self) -> Problems:
        bad = _powers_of_two(self, "size_bytes") + _at_most(self, size_bytes=1 << 30)
        if self.port_bytes_per_cycle != STICK_BYTES:
            bad.append(("port_bytes_per_cycle", f"the engine moves one {STICK_BYTES} B stick per port cycle"))
        return bad


@dataclass(frozen=True)
class Ring:
    link_bytes_per_cycle: int
    hop_latency_cycles: int
    send_stick_cycles: int  # cycles an LX-to-LX (send) stick holds each link it crosses
    stops: tuple[str, ...]

    def problems(self) -> Problems:
        bad = _positive(self, "hop_latency_cycles", "send_stick_cycles")  # a hop takes time: hop chaining relies on it
        if self.link_bytes_per_cycle != STICK_BYTES:
            bad.append(("link_bytes_per_cycle", f"the engine moves one {STICK_BYTES} B stick per link cycle"))
        if len(set(self.stops)) != len(self.stops):
            bad.append(("stops", "a stop is listed twice"))
        return bad

    def multicast_legs(self, src: int, dsts: list[int]) -> list[int]:
        """Where the copies of a stick multicast from stop ``src`` end: the farthest of ``dsts`` in
        each direction (shorter way round, ties clockwise), clockwise first. Each copy passes, and
        is written at, every destination on its way."""
        n, far = len(self.stops), {}
        for dst in dsts:
            clockwise = (dst - src) % n
            way, hops = (0, clockwise) if clockwise <= n - clockwise else (1, n - clockwise)
            if hops > far.get(way, (0, -1))[0]:
                far[way] = (hops, dst)
        return [far[way][1] for way in sorted(far)]


@dataclass(frozen=True)
class Dram:
    size_bytes: int
    channels: int
    controllers: int
    banks: int
    row_bytes: int
    interleave_bytes: int
    channel_hash: str  # "none": line % channels; "xor": every group of line bits folded into the channel
    page_policy: str
    stick_cycles: int
    t_rcd_cycles: int
    t_rl_cycles: int
    t_wl_cycles: int
    t_rp_cycles: int
    t_ras_cycles: int
    t_wr_cycles: int
    t_wtr_cycles: int
    t_rtw_cycles: int
    t_refi_cycles: int
    t_rfc_cycles: int

    def problems(self) -> Problems:
        bad = _powers_of_two(self, "channels", "controllers", "banks", "row_bytes", "interleave_bytes")
        bad += _at_most(self, channels=1024, banks=1024)
        bad += _positive(self, "size_bytes", "stick_cycles", "t_refi_cycles")
        bad += _non_negative(self, *[f for f in self.__dataclass_fields__ if f.startswith("t_")])
        if self.interleave_bytes < STICK_BYTES or self.interleave_bytes > self.row_bytes:
            bad.append(("interleave_bytes", f"must be between {STICK_BYTES} and row_bytes"))
        if self.page_policy not in ("open", "closed"):
            bad.append(("page_policy", "must be \"open\" or \"closed\""))
        if self.channel_hash not in ("none", "xor"):
            bad.append(("channel_hash", "must be \"none\" or \"xor\""))
        if self.controllers > self.channels:
            bad.append(("controllers", "cannot exceed channels"))
        if self.t_rfc_cycles >= self.t_refi_cycles:
            bad.append(("t_rfc_cycles", "must be shorter than t_refi_cycles"))
        return bad

    def channel_of(self, addr: Any) -> Any:
        """The channel of a DRAM address (or an array of them): its interleave line modulo the channels,
        XORed with every higher group of line bits under ``channel_hash = "xor"`` (a permutation within
        each run of ``channels`` lines, so a stride of a multiple of ``interleave * channels`` bytes
        still visits every channel). engine/dram.py computes the same."""
        line = addr // self.interleave_bytes
        channel = line % self.channels
        if self.channel_hash == "xor":
            for _ in range(self.hash_groups() - 1):
                line = line // self.channels
                channel = channel ^ (line % self.channels)
        return channel

    def hash_groups(self) -> int:
        """Groups of log2(channels) line bits that an address of device memory can have."""
        lines, groups = -(-self.size_bytes // self.interleave_bytes), 1
        while self.channels ** groups < lines:
            groups += 1
        return groups

    def peak_bytes_per_cycle(self) -> float:
        return self.channels * STICK_BYTES / self.stick_cycles


@dataclass(frozen=True)
class Pcie:
    gen: int
    lanes: int
    gbytes_per_s: float
    max_payload_bytes: int
    tlp_overhead_bytes: int
    latency_cycles: int

    def problems(self) -> Problems:
        bad = _positive(self, "gen", "lanes", "gbytes_per_s")
        bad += _powers_of_two(self, "max_payload_bytes")
        return bad + _non_negative(self, "tlp_overhead_bytes", "latency_cycles")


@dataclass(frozen=True)
class Launch:
    """What starting a kernel program costs on the card, before its first instruction runs. An on-chip
    relayout (a program whose only instructions are LX-to-LX sends: torch-spyre's STCDP data op, its own
    execute) also sets up its moves first; sends inside a compute kernel (split K, reductions) do not."""

    dispatch_cycles: int
    relayout_setup_cycles: int

    def problems(self) -> Problems:
        return _non_negative(self, "dispatch_cycles", "relayout_setup_cycles")


@dataclass(frozen=True)
class Machine:
    """The whole card. ``problems()`` also checks what spans units (ring stops)."""

    clock: Clock
    cores: Cores
    pt: PtArray
    sfu: Sfu
    dma: Dma
    fifo: Fifo
    lx: Lx
    ring: Ring
    dram: Dram
    pcie: Pcie
    launch: Launch

    def problems(self) -> Problems:
        bad: Problems = []
        for name in self.__dataclass_fields__:
            unit = getattr(self, name)
            bad += [(f"{name}.{key}", msg) for key, msg in unit.problems()]
            bad += [(f"{name}.{key}", f"must be at most {MAX_CYCLES_VALUE}") for key, value in _cycle_values(unit)
                    if value > MAX_CYCLES_VALUE]
        bad += self._pcie_rate()
        want = {f"core{i}" for i in range(self.cores.count)}
        want |= {f"mc{i}" for i in range(self.dram.controllers)} | {"pcie"}
        have = set(self.ring.stops)
        if have != want:
            missing, extra = sorted(want - have), sorted(have - want)
            bad.append(("ring.stops", f"must list each core, memory controller and pcie once "
                        f"(missing {missing[:4]}, unknown {extra[:4]})"))
        return bad

    def _pcie_rate(self) -> Problems:
        """The PCIe port's cycles per stick (kept in 1/1024-cycle fixed point) must fit the engine's int64s."""
        p = self.pcie
        if min(p.gbytes_per_s, self.clock.ghz) <= 0 or p.max_payload_bytes <= 0:
            return []  # reported by the units' own checks
        per_stick = STICK_BYTES * (p.max_payload_bytes + p.tlp_overhead_bytes) / p.max_payload_bytes \
            / (p.gbytes_per_s / self.clock.ghz)
        if 1 / 1024 <= per_stick <= MAX_CYCLES_VALUE:
            return []
        return [("pcie.gbytes_per_s", f"gives {per_stick:.3g} cycles per 128 B stick at clock.ghz = {self.clock.ghz}; "
                 f"must be between 1/1024 and {MAX_CYCLES_VALUE}")]

    def stop_of(self, name: str) -> int:
        return self.ring.stops.index(name)

    def pcie_us(self, nbytes: int) -> float:
        """One copy between the host and the card, as the engine's PCIe unit takes it: the link's latency,
        then the bytes with TLP overhead at its rate. The host model adds the drawer's switch."""
        p = self.pcie
        wire = nbytes * (p.max_payload_bytes + p.tlp_overhead_bytes) / p.max_payload_bytes
        return p.latency_cycles / (self.clock.ghz * 1000) + wire / (p.gbytes_per_s * 1000)

    def launch_us(self) -> float:
        """The firmware's dispatch of a kernel program, in µs: part of every program's simulated time."""
        return self.launch.dispatch_cycles / (self.clock.ghz * 1000)
