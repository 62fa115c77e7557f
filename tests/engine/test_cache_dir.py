"""The numba cache folder (engine/cache.py, engine/jit.py): every jitted engine function caches under
``CACHE_DIR`` (keyed on the engine's sources) whichever engine module a process imports first, and numba's own
``CACHE_DIR`` is left as the process set it. A fresh process, since the folder is bound when a decorator runs."""

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

CHILD = """
import importlib, json, pkgutil, sys
import numba
from numba.core.registry import CPUDispatcher
importlib.import_module(sys.argv[1])
import spyre_emu.engine as engine
for module in pkgutil.iter_modules(engine.__path__):
    importlib.import_module(f"spyre_emu.engine.{module.name}")
paths = {f"{name}.{key}": value._cache._cache_path for name, mod in list(sys.modules.items())
         if name.startswith("spyre_emu.engine") for key, value in vars(mod).items()
         if isinstance(value, CPUDispatcher) and value.__module__ == name}
print(json.dumps({"config": numba.config.CACHE_DIR, "cache_dir": engine.CACHE_DIR, "paths": paths}))
"""


@pytest.mark.parametrize("first", ["spyre_emu.engine.queue", "spyre_emu.engine.loop"])
def test_every_jitted_function_caches_in_the_engine_folder(tmp_path, first):
    env = {**os.environ, "SPYRE_EMU_CACHE": str(tmp_path / "spyre"), "NUMBA_CACHE_DIR": str(tmp_path / "other")}
    done = subprocess.run([sys.executable, "-c", CHILD, first], capture_output=True, text=True, check=True,
                          env=env, cwd=ROOT)
    seen = json.loads(done.stdout)
    assert seen["config"] == str(tmp_path / "other")  # restored after each decorator
    assert seen["cache_dir"].startswith(str(tmp_path / "spyre" / "numba-"))
    modules = {name.rsplit(".", 1)[0].removeprefix("spyre_emu.engine.") for name in seen["paths"]}
    assert modules >= {"queue", "dram", "ring", "dma", "fifo", "loop"}
    assert len(seen["paths"]) > 40  # every engine module's dispatchers, not a few
    misplaced = {name: path for name, path in seen["paths"].items()
                 if not path.startswith(seen["cache_dir"] + os.sep)}
    assert misplaced == {}
