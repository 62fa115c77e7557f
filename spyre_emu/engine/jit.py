"""``njit`` for the engine's modules: numba's, with the function's on-disk cache in ``cache.CACHE_DIR``.

numba picks a function's cache folder when the decorator runs (``numba.config.CACHE_DIR`` at that moment),
so it is set for the decorator only and restored after: another numba user in the same process keeps its own.
Every jitted engine module imports ``njit`` from here, so it lands in the right folder whichever module
is imported first (the loop, or a test importing ``queue`` directly).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numba

from .cache import CACHE_DIR


def njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    def make(function: Callable[..., Any]) -> Any:
        saved, numba.config.CACHE_DIR = numba.config.CACHE_DIR, CACHE_DIR
        try:
            return numba.njit(**options)(function)
        finally:
            numba.config.CACHE_DIR = saved
    return make
