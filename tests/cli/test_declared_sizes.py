"""Sizes are checked from the declared shapes before anything is built: a refused program costs little memory."""

import json
import math
import resource
import subprocess
import sys

import pytest

from spyre_emu.validation.workloads import matmul_program
from tests.conftest import ROOT

LIMIT_BYTES = 3 << 30        # address space of the child: keeps a regression from swapping the machine
MAX_RSS_BYTES = 400 << 20    # generous: the refusal measures about 100 MB, the CLI's imports included (not numba)


def _add(n: int, division: dict) -> dict:
    tensors = {name: {"shape": [n, n], "dtype": "fp16", "role": role}
               for name, role in (("a", "input"), ("b", "input"), ("c", "output"))}
    return {"format": "spyre-emu.kernel-program", "version": 1, "tensors": tensors,
            "kernels": [{"op": "add", "inputs": ["a", "b"], "outputs": ["c"], "dims": {"mb": n, "out": n},
                         "work_division": division}]}


def _limit() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (LIMIT_BYTES, LIMIT_BYTES))


def _run(path) -> subprocess.CompletedProcess:
    """``spyre-emu run path --quiet`` in a child; its stdout is the peak of its own memory. (ru_maxrss would also
    count the parent's pages at the fork: Linux keeps it across exec, and the test process has grown by then.)"""
    code = ("import re, sys; from spyre_emu.cli import main; status = main(sys.argv[1:]); "
            "print(int(re.search(r'VmHWM:\\s+(\\d+) kB', open('/proc/self/status').read()).group(1)) * 1024); "
            "sys.exit(status)")
    return subprocess.run([sys.executable, "-c", code, "run", str(path), "--quiet"], capture_output=True, text=True,
                          check=False, timeout=120, preexec_fn=_limit, cwd=ROOT)


@pytest.mark.parametrize("division", [{}, {"mb": 4}])
def test_a_share_past_the_per_core_span_is_refused_before_lowering(tmp_path, division):
    """A 400-byte program of a 65536 x 65536 fp16 add was refused after 22-24 s and 3.8-5.3 GB: the per-core
    span check ran after lowering had built per-stick arrays."""
    path = tmp_path / "p.json"
    path.write_text(json.dumps(_add(65536, division)))
    done = _run(path)
    assert done.returncode == 2, done.stderr
    share = 65536 * 65536 * 2 // math.prod(division.values())
    assert done.stderr.startswith(f"spyre-emu: error: {path}: kernels[0].work_division: a core would span at "
                                  f"least {share} B of tensor 'a'"), done.stderr
    assert int(done.stdout) < MAX_RSS_BYTES


def test_a_core_spanning_past_256_mb_is_refused_before_lowering(tmp_path):
    """QK^T [40, 2048, 128] x [40, 128, 4096] with N over 32 cores: each core's two N sticks of C [40, 2048, 4096]
    span nearly all its 671 MB (tests/lowering/test_spans.py). The refusal came after lowering: 15-31 s, 730 MB."""
    path = tmp_path / "qk.json"
    path.write_text(json.dumps(matmul_program(40, 2048, 4096, 128, (1, 1, 32, 1))))
    done = _run(path)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (f"spyre-emu: error: {path}: kernels[0].work_division: core 0 would span 670771200 B of "
                           "tensor 'C'; at most 268435456 B per core: split the work over more cores\n")
    assert int(done.stdout) < MAX_RSS_BYTES
