"""What the host tests derive their expected times from: configs/host.toml and the card's PCIe figures."""

from __future__ import annotations

from spyre_emu.config import load_machine
from spyre_emu.host import load_host

MACHINE = load_machine()
HOST = load_host()
RT, DRAWER = HOST.runtime, HOST.drawer
BUILD = RT.deserialize_us + RT.prepare_us          # a program's first launch: 4,956.5 µs


def pcie_us(nbytes: int) -> float:
    """1,100 cycles at 1.1 GHz = 1 µs, the switch's 0.105 µs, then the bytes with 24 B of TLP per 512 B
    at 63 GB/s."""
    return 1.0 + 0.105 + nbytes * 536 / 512 / 63_000
