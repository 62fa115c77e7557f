"""``torch.load(..., map_location="spyre")`` and checkpoints saved from the device: a storage tagged
with the device is rebuilt in the card's memory, its bytes copied in over PCIe (timed), instead of
torch's path for PrivateUse1, which needs a C++ allocator."""

from __future__ import annotations

import re
from typing import Any

import torch

from . import state

PRIORITY = 15  # before torch's own PrivateUse1 entry (23), after the CPU's (10)


def restore(storage: Any, location: str) -> torch.UntypedStorage | None:
    """The storage on the device when ``location`` names it ("spyre", "spyre:0"), else None (not ours)."""
    name = state.current().name
    if not re.fullmatch(rf"{name}(:0)?", location):
        return None
    data = storage.untyped() if isinstance(storage, torch.TypedStorage) else storage
    host = torch.empty(0, dtype=torch.uint8).set_(data.cpu())
    return host.to(state.current().torch_device).untyped_storage()


def register() -> None:
    torch.serialization.register_package(PRIORITY, lambda storage: None, restore)
