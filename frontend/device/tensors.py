"""Device tensors and their bytes.

A device tensor is a plain torch tensor on the PrivateUse1 device whose storage points at a card
address (plus ``POINTER_BASE``, so no pointer is null) and owns nothing; the bytes live in a host
buffer of the same size, the model of the card's memory at that address. ``host_view(t)`` is a CPU
tensor over those bytes with ``t``'s sizes, strides and offset: ops run on it (or on the simulated
card, from and into it), so views and in-place ops share data exactly as on a real device.

Memory is freed when nothing but this registry holds a device storage any more (no tensor, no
Python reference to the storage): ``sweep`` checks before every allocation and every statistic
(which also collect reference cycles first), so the figures count live tensors and storages only.
"""

from __future__ import annotations

import gc
import sys
from dataclasses import dataclass

import torch

from .memory import CardMemory, OutOfMemoryError

POINTER_BASE = 1 << 40
_CPU = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


@dataclass
class Allocation:
    address: int                  # on the card
    nbytes: int
    host: torch.UntypedStorage    # the bytes
    device: torch.UntypedStorage  # what device tensors hold


class Store:
    """Every live allocation of one card, by device pointer."""

    def __init__(self, memory: CardMemory, device: torch.device):
        self.memory, self.device = memory, device
        self.live: dict[int, Allocation] = {}      # by device pointer
        self.by_host: dict[int, Allocation] = {}   # by the host buffer's pointer

    def sweep(self, collect: bool = False) -> None:
        """Free the unreferenced allocations; ``collect`` runs Python's cycle collector first (tensors in
        reference cycles), as statistics and a failed allocation do."""
        if collect:
            gc.collect()
        # Nothing but this registry holds a storage: no tensor (its use count) and no Python reference to
        # its one Python object (``t.untyped_storage()`` returns the registry's): sys.getrefcount sees the
        # attribute and its own argument. Counted here, not in a helper: a Python call's argument may or
        # may not hold a reference of its own, depending on how the interpreter specialized the call.
        unused = [p for p, a in self.live.items()
                  if torch._C._storage_Use_Count(a.device._cdata) == 1 and sys.getrefcount(a.device) == 2]
        for ptr in unused:
            allocation = self.live.pop(ptr)
            if self.by_host.get(allocation.host.data_ptr()) is allocation:
                del self.by_host[allocation.host.data_ptr()]
            self.memory.free(allocation.address)

    def allocation(self, t: torch.Tensor) -> Allocation:
        return self.live[t.untyped_storage().data_ptr()]

    def host_view(self, t: torch.Tensor) -> torch.Tensor:
        """The CPU tensor over ``t``'s bytes: same sizes, strides, offset and dtype."""
        host = self.allocation(t).host
        return torch.empty(0, dtype=t.dtype).set_(host, t.storage_offset(), t.shape, t.stride())

    def adopt(self, data: torch.Tensor) -> torch.Tensor:
        """A new allocation holding ``data``'s storage (no copy), and the device tensor over it."""
        return self.tensor_on(self._allocate(data.untyped_storage()), data)

    def place(self, data: torch.Tensor) -> torch.Tensor:
        """``data`` as a device tensor: over the allocation whose bytes it views, else adopted."""
        owner = self.owner(data)
        return self.tensor_on(owner.device, data) if owner is not None else self.adopt(data)

    def repoint(self, t: torch.Tensor, data: torch.Tensor) -> None:
        """After an op resized ``t``'s host view into ``data`` (an ``out=`` argument): ``t`` takes its
        geometry, over a new allocation when the bytes moved."""
        owner = self.owner(data)
        storage = owner.device if owner is not None else self._allocate(data.untyped_storage())
        self._set(t, storage, data)

    def _allocate(self, host: torch.UntypedStorage) -> torch.UntypedStorage:
        self.sweep()
        try:
            address = self.memory.allocate(host.nbytes())
        except OutOfMemoryError:  # tensors in reference cycles may hold memory: collect them, then try again
            self.sweep(collect=True)
            address = self.memory.allocate(host.nbytes())
        device = torch._C._construct_storage_from_data_pointer(POINTER_BASE + address, self.device, host.nbytes())
        allocation = Allocation(address, host.nbytes(), host, device)
        self.live[device.data_ptr()] = allocation
        if host.nbytes():  # empty buffers share no bytes, whatever their pointer
            self.by_host[host.data_ptr()] = allocation
        return device

    def tensor_on(self, storage: torch.UntypedStorage, like: torch.Tensor) -> torch.Tensor:
        return self._set(torch._C._acc.create_empty_tensor((0,), like.dtype), storage, like)

    @staticmethod
    def _set(t: torch.Tensor, storage: torch.UntypedStorage, like: torch.Tensor) -> torch.Tensor:
        # set_ on the CPU kernel: it only records the storage and the geometry (no device kernel exists)
        return torch.ops.aten.set_.source_Storage_storage_offset.redispatch(
            _CPU, t, storage, like.storage_offset(), like.shape, like.stride())

    def owner(self, data: torch.Tensor) -> Allocation | None:
        """The allocation whose bytes ``data`` (a CPU tensor) views, if any."""
        storage = data.untyped_storage()
        return self.by_host.get(storage.data_ptr()) if storage.nbytes() else None

