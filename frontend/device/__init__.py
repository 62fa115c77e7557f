"""The emulated card as a native PyTorch device: ``tensor.to("spyre")`` on a machine without a card.

``register_device()`` (opt-in: importing torch or spyre_emu registers nothing) renames PyTorch's
PrivateUse1 backend to ``spyre`` (``spyre_emu`` when torch-spyre is installed, since a process has one
PrivateUse1 backend), registers ``torch.spyre`` (module.py) and one Python fallback that every ATen
op on a device tensor goes through (dispatch.py). See docs/device.md.
"""

from __future__ import annotations

import functools
import importlib.util

import torch
from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

from spyre_emu.config import load_machine
from spyre_emu.errors import SpyreEmuError
from spyre_emu.host import load_host

from ..decompositions import attention
from ..runtime import RESIDENCE
from . import module, serialization, state
from .dispatch import fallback
from .report import DeviceReport, report

__all__ = ["DeviceReport", "register_device", "report"]

_LIBRARY: list[torch.library.Library] = []


def device_name() -> str:
    """``spyre``, or ``spyre_emu`` beside torch-spyre (which registers ``spyre`` itself)."""
    return "spyre_emu" if importlib.util.find_spec("torch_spyre") is not None else "spyre"


def register_device(machine: str | None = None, overrides: tuple[str, ...] = ()) -> str:
    """Register the device (once per process; later calls return its name) on the card of the TOML
    ``machine`` (default configs/spyre.toml) with ``KEY=VALUE`` overrides."""
    if state.installed():
        return state.current().name
    name, taken = device_name(), torch._C._get_privateuse1_backend_name()
    if taken != "privateuseone":
        raise SpyreEmuError(f"PyTorch's PrivateUse1 backend is already registered as {taken!r}; "
                            "one process holds one such device")
    machine_config, host = load_machine(machine, list(overrides)), load_host()  # bad configs fail before any change
    _setup_privateuseone_for_python_backend(name, backend_module=module)
    dev = state.Device(name, machine_config, host)
    library = torch.library.Library("_", "IMPL")
    library.fallback(fallback, "PrivateUse1")
    kernels = torch.library.Library("aten", "IMPL")
    # torch picks attention's kernel by device (the CPU's computes half in float32): the card's instead
    kernels.impl("scaled_dot_product_attention", attention, "PrivateUse1")
    # a backend's convolution hook (torch's default raises): the convolution itself, through the dispatcher
    kernels.impl("convolution_overrideable", functools.partial(fallback, torch.ops.aten.convolution.default),
                 "PrivateUse1")
    _LIBRARY.extend([library, kernels])
    state.install(dev)
    serialization.register()
    RESIDENCE.append(dev)
    return name
