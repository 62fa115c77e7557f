"""examples/make_frontend_calibration.py: the launch lists validate reads are what the front end launches now."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location("make_frontend_calibration",
                                                  ROOT / "examples" / "make_frontend_calibration.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_mean_launch_list_is_the_front_ends():
    """torch.mean over dim 0 of (128, 64) compiles to one program with one mean kernel, as the file holds (the
    SDPA's and the block's lists take a minute to compile: the script writes them the same way)."""
    script = _script()
    written = json.loads((script.OUT / "launch_phases_mean.launches.json").read_text())
    assert script.launches("launch_phases_mean") == written
    assert [k["op"] for p in written["launches"] for k in p["kernels"]] == ["mean"]
