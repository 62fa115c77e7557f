"""The emulated device, registered once for the test process (a process holds one PrivateUse1 backend)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from spyre_emu.frontend.device import register_device  # noqa: E402

pytestmark = pytest.mark.torch


@pytest.fixture(scope="session")
def device() -> str:
    return register_device()
