"""Every array index the engine computes is in range: the engine casts row indices to unsigned (``jit.U``), so a
negative one would no longer wrap to the array's end (numba's default for a signed index) but read or write
outside the array. A fresh process compiles the engine with numba's bounds checking on (``NUMBA_BOUNDSCHECK=1``,
into an empty cache) and simulates programs that use every unit and event kind: loads (plain, multicast,
strided), stores, sends, PCIe copies, FIFO movers, SFU ops and PT passes with tokens; an index out of range
raises there. Its logs must equal this process's (compiled without the check). A cold compile: ``--slow``."""

import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from spyre_emu.engine import simulate
from spyre_emu.pipeline import load
from tests.conftest import ROOT
from tests.engine.test_hop_chaining import _mixed_traffic, _waiting_injectors

EXAMPLES = ["gemm_1024_32core", "mlp_gelu_kernels", "softmax_1core", "restickify_kernels", "dram_roundtrip_128k",
            "ring_move_128k"]

CHILD = """
import hashlib, json, sys
import numpy as np
from spyre_emu.config import load_machine
from spyre_emu.engine import simulate
from spyre_emu.pipeline import load
from spyre_emu.unit_program import parse_unit_program
names, mixed = json.loads(sys.argv[1]), json.loads(sys.argv[2])
machine = load_machine()
programs = [load(f"examples/programs/{name}.json", machine).units for name in names]
programs += [parse_unit_program(p, machine) for p in mixed]
print(json.dumps([hashlib.sha256(b"".join(np.ascontiguousarray(getattr(simulate(p, machine, chain_hops=chain), f))
                                          .tobytes() for f in ("start", "end", "first_push", "order", "unit_stats",
                                                               "channel_stats", "link_stats"))).hexdigest()
                  for p in programs for chain in (True, False)]))
"""


def _digest(log) -> str:
    return hashlib.sha256(b"".join(np.ascontiguousarray(getattr(log, f)).tobytes() for f in (
        "start", "end", "first_push", "order", "unit_stats", "channel_stats", "link_stats"))).hexdigest()


def test_indices_in_range_with_bounds_checking(request, spyre, tmp_path):
    if not request.config.getoption("--slow"):
        pytest.skip("compiles the engine with bounds checking (a cold compile): --slow")
    mixed = [_mixed_traffic(13, 24), _waiting_injectors(9, 24)]
    env = {**os.environ, "NUMBA_BOUNDSCHECK": "1", "SPYRE_EMU_CACHE": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", CHILD, json.dumps(EXAMPLES), json.dumps(mixed)], check=False,
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    from spyre_emu.unit_program import parse_unit_program  # noqa: PLC0415 -- only the slow run needs it
    programs = [load(ROOT / "examples" / "programs" / f"{name}.json", spyre).units for name in EXAMPLES]
    programs += [parse_unit_program(json.loads(json.dumps(p)), spyre) for p in mixed]
    expected = [_digest(simulate(p, spyre, chain_hops=chain)) for p in programs for chain in (True, False)]
    assert json.loads(done.stdout) == expected
