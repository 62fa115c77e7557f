"""The simulator works where torch is not installed: only spyre_emu.frontend needs it."""

import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = """
import sys
sys.modules["torch"] = None  # any `import torch` now raises ImportError, as without torch installed
from spyre_emu.cli import main
code = main(["run", "--quiet", sys.argv[1]])
assert "torch" not in [m.split(".")[0] for m in sys.modules if sys.modules[m] is not None]
sys.exit(code)
"""


def test_running_a_kernel_program_never_imports_torch():
    program = ROOT / "examples" / "programs" / "add_exp_kernels.json"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(program)], check=False, capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
