"""Print a SHA-256 of each program's unit program and of its report, here and at a reference revision.

Run: ``python benchmarks/lowered_digest.py [--reference REV] [--case ROLE,PHASE,B,M,N,K,SB,SM,SN,SK ...]``.
A check for changes that must leave every unit program and cycle alone (a speed-up of the lowering,
the loader or the report): each example program (examples/programs/*.json) and each sweep case is
loaded (lowered) and simulated in a child process per checkout, and the two digests of every program
must match. The unit program's digest covers its buffers, every instruction (core, unit, op, args,
waits, signals, JSON path, kernel) and every array of its columns; the report's is its JSON.
Exit status 1 when a digest differs.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
from dataclasses import astuple, fields
from pathlib import Path

import numpy as np
from checkout import child_json, first_module, reference_checkout
from sweep_cases import SLOWEST

from spyre_emu import pipeline
from spyre_emu.config import load_machine

calibration = first_module("spyre_emu.validation.calibration", "spyre_emu.calibration")
ROOT = Path(__file__).resolve().parents[1]


def unit_digest(units) -> str:
    """SHA-256 of a unit program's canonical form (its buffers, instructions and columns)."""
    h = hashlib.sha256()
    h.update(repr(sorted((name, astuple(b)) for name, b in units.buffers.items())).encode())
    for ins in units.columns.instructions:
        h.update(repr((ins.core, ins.unit, ins.op, sorted(ins.args.items()), ins.wait, ins.signal, ins.path,
                       ins.kernel)).encode())
    for f in fields(units.columns):
        value = getattr(units.columns, f.name)
        if isinstance(value, np.ndarray):
            h.update(f.name.encode() + str(value.dtype).encode() + value.tobytes())
        elif isinstance(value, dict):
            h.update(repr(sorted((int(k), v.tobytes()) for k, v in value.items())).encode())
        elif f.name != "instructions":
            h.update(repr(value).encode())
    return h.hexdigest()


def child(names: list[str]) -> dict[str, list[str]]:
    machine = load_machine()
    out = {}
    for name in names:
        if name.endswith(".json"):
            program = pipeline.load(ROOT / "examples" / "programs" / name, machine)
        else:
            b, m, n, k, *split = (int(x) for x in name.split(",")[2:])
            program = pipeline.parse(calibration.matmul_program(b, m, n, k, tuple(split)), machine, "calibration")
        report = pipeline.run(program, machine, cache=False).report
        out[name] = [unit_digest(program.units), hashlib.sha256(report.to_json().encode()).hexdigest()]
    return out


def measure(root: Path, names: list[str]) -> dict[str, list[str]]:
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{ROOT / 'benchmarks'}", "SPYRE_EMU_RESULT_CACHE": "0"}
    return child_json([__file__, "--child", json.dumps(names)], f"digests at {root}", cwd=root, env=env)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--case", nargs="*", default=SLOWEST, help="sweep rows: role,phase,B,M,N,K,split_b,m,n,k")
    ap.add_argument("--reference", help="a git revision to compare against (run from a temporary worktree)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    names = sorted(p.name for p in (ROOT / "examples" / "programs").glob("*.json")) + args.case
    new = measure(ROOT, names)
    with reference_checkout(ROOT, args.reference) as ref_root:
        ref = measure(ref_root, names) if ref_root else new
    differ = [name for name in names if new[name] != ref[name]]
    for name in names:
        unit, report = new[name]
        print(f"{name:<44} unit program {unit[:16]}  report {report[:16]}  "
              f"{'DIFFERS from the reference' if name in differ else 'same'}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
