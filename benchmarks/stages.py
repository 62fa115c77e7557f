"""Wall time per stage of a run: the benchmarks wrap named functions where they are looked up."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable


def timed_stages(stages: list[tuple[str, str]], spent: dict[str, float]) -> None:
    """Wrap each (module, function) of ``stages`` where it is looked up, adding its inclusive wall time
    to ``spent["module.function"]``; a missing module, or one without that function, is left alone."""
    for module_name, attr in stages:
        try:
            module = importlib.import_module(module_name)
        except ImportError:  # a revision without that module (the installed tree's copy may not import there)
            continue
        if not hasattr(module, attr):
            continue
        key = f"{module_name.rsplit('.', 1)[-1]}.{attr}"

        def wrap(fn: Callable, key: str = key) -> Callable:
            def timed(*args, **kwargs):
                t = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    spent[key] = spent.get(key, 0.0) + time.perf_counter() - t
            return timed
        setattr(module, attr, wrap(getattr(module, attr)))
