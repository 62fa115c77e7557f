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
import numpy as np

from .cache import CACHE_DIR

# A row index into a state array, cast to unsigned: numba wraps a negative signed index (a sign test and an
# add of the dimension on every access, which the compiler cannot drop since it cannot know the index is
# never negative); an unsigned one it uses as it is. Every index the engine computes is non-negative, so the
# cast changes no value. Written at the index, around the whole expression (``qa[U(base + n)]``): numba types
# an arithmetic mix of uint64 and int64 as int64, signed again. Not needed where the compiler sees the sign
# (a constant, ``x & mask``); only ``order[-1]`` (loop._finish_nb) relies on the wrap. A function that uses
# one row several times takes it once, ``unit = us[U(u)]``, and indexes the row by the layout's constants
# (``unit[L.U_PC]``), which need no wrap test either: nearly the same machine code as ``us[U(u), L.U_PC]`` at each
# access (docs/speed.md, session 41); ``dma.issue_nb`` keeps the casts, where the view measured slower. Take a
# row only where the index is valid (not a -1 sentinel).
U = np.uint64


def njit(**options: Any) -> Callable[[Callable[..., Any]], Any]:
    def make(function: Callable[..., Any]) -> Any:
        saved, numba.config.CACHE_DIR = numba.config.CACHE_DIR, CACHE_DIR
        try:
            return numba.njit(**options)(function)
        finally:
            numba.config.CACHE_DIR = saved
    return make
