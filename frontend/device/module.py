"""``torch.spyre``: the device module torch looks up by the device's name, with torch-spyre's (and
torch.cuda's) function names. Every function acts on the one emulated card (state.current())."""

from __future__ import annotations

from typing import Any

import torch

from . import state
from .report import report
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream

__all__ = ["Event", "Stream", "current_device", "current_stream", "default_stream", "device", "device_count",
           "empty_cache", "get_device_name", "get_rng_state", "initial_seed", "is_available", "is_initialized",
           "manual_seed", "manual_seed_all", "max_memory_allocated", "memory_allocated", "memory_stats", "report",
           "reset_peak_memory_stats", "seed", "set_device", "set_rng_state", "set_stream", "stream", "synchronize"]


def is_available() -> bool:
    return state.installed()


def is_initialized() -> bool:
    return state.installed()


def _is_in_bad_fork() -> bool:
    return False


def device_count() -> int:
    return 1


def current_device() -> int:
    return 0


def set_device(device: Any) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    if index not in (None, 0):
        raise ValueError(f"the emulated device has one card (index 0), got {index}")


def get_device_name(device: Any = None) -> str:
    return "IBM Spyre (spyre-emu model)"


class device:  # noqa: N801 (torch.cuda.device's name)
    """``with torch.spyre.device(0):``: the one card is always current."""

    def __init__(self, device: Any):
        set_device(device)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def synchronize(device: Any = None) -> None:
    state.current().synchronize()


def manual_seed(seed: int, device: Any = None) -> None:
    state.current().generator.manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    manual_seed(seed)


def _is_compiled() -> bool:
    return True


def seed() -> None:
    state.current().generator.seed()


def initial_seed() -> int:
    return state.current().generator.initial_seed()


def get_rng_state(device: Any = None) -> torch.Tensor:
    return state.current().generator.get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = None) -> None:
    state.current().generator.set_state(new_state)


def memory_allocated(device: Any = None) -> int:
    dev = state.current()
    dev.store.sweep(collect=True)
    return dev.store.memory.stats.allocated


def max_memory_allocated(device: Any = None) -> int:
    memory_allocated()
    return state.current().store.memory.stats.peak


def reset_peak_memory_stats(device: Any = None) -> None:
    stats = state.current().store.memory.stats
    stats.peak = memory_allocated()


def empty_cache() -> None:
    state.current().store.sweep(collect=True)


def memory_stats(device: Any = None) -> dict[str, int]:
    dev = state.current()
    dev.store.sweep(collect=True)
    stats = dev.store.memory.stats
    return {"allocated_bytes.all.current": stats.allocated, "allocated_bytes.all.peak": stats.peak,
            "allocation.all.allocated": stats.allocations, "allocation.all.freed": stats.frees,
            "capacity_bytes": dev.store.memory.capacity}
