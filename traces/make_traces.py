"""Regenerate traces/: the timeline of every example program, as `spyre-emu run --trace` writes it.

Run ``python traces/make_traces.py`` after an intended timing change, and commit traces/ with the
reason. tests/results/test_traces.py fails, naming the first event that moved, when a fresh run
differs from these files; tests/results/test_acelyzer.py runs IBM's trace analyzer on them.

Each example gives ``<name>.json.gz`` (the trace, gzipped: the uncompressed traces are about
10 MB) and ``<name>_ideal_cycles/`` (the folder ``acelyzer -c`` reads).
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # this checkout, whatever the current directory

from spyre_emu import Machine, RunResult, load_machine  # noqa: E402
from spyre_emu.pipeline import load, run  # noqa: E402
from spyre_emu.results import chrome_trace, ideal_cycles_files  # noqa: E402

HERE = ROOT / "traces"
EXAMPLES = sorted((ROOT / "examples" / "programs").glob("*.json"))


def simulate_example(path: Path, machine: Machine) -> RunResult:
    """Run one example, named by its path in the repository (so that its report and trace do not
    depend on where the checkout is)."""
    program = load(path, machine)
    units = dataclasses.replace(program.units, source=path.relative_to(ROOT).as_posix())
    return run(dataclasses.replace(program, units=units), machine)


def timeline(result: RunResult, machine: Machine) -> tuple[str, dict[str, bytes]]:
    """What `spyre-emu run --trace` writes: the trace, and the ideal-cycles files by relative path."""
    return chrome_trace(result.log, machine, result.report.data), ideal_cycles_files(result.report.data["kernels"])


def main() -> None:
    machine = load_machine()
    for stale in HERE.glob("*.json.gz"):
        stale.unlink()
    for stale in HERE.glob("*_ideal_cycles"):
        shutil.rmtree(stale)
    for path in EXAMPLES:
        trace, ideal = timeline(simulate_example(path, machine), machine)
        (HERE / f"{path.stem}.json.gz").write_bytes(gzip.compress(trace.encode(), compresslevel=9, mtime=0))
        for rel, payload in ideal.items():
            target = HERE / f"{path.stem}_ideal_cycles" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(payload)
        print(f"traces/{path.stem}.json.gz: {len(trace):,} bytes of trace, {len(ideal)} kernels")


if __name__ == "__main__":
    main()
