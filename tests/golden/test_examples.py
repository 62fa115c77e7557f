"""Golden cycle counts of the example programs: a timing change shows up here as a diff.

After an intended change, regenerate with ``UPDATE_GOLDEN=1 pytest tests/golden`` and
commit the new cycles.json with the reason in the commit message.
"""

import json
import os
from pathlib import Path

from spyre_emu.engine import simulate
from spyre_emu.pipeline import load_program

HERE = Path(__file__).parent
EXAMPLES = sorted((HERE.parents[1] / "examples" / "programs").glob("*.json"))


def test_example_cycles_match_golden(spyre):
    got = {p.stem: simulate(load_program(p, spyre), spyre).total_cycles for p in EXAMPLES}
    golden_file = HERE / "cycles.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden_file.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(golden_file.read_text())
