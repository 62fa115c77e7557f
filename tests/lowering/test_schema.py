"""The lowering's output obeys the unit-program schema, which the loader skips for it (trusted output)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from spyre_emu import lowering
from spyre_emu.config import load_machine
from spyre_emu.errors import ProgramError
from spyre_emu.kernel_program import FORMAT, parse_kernel_program
from spyre_emu.unit_program import load as unit_load

PROGRAMS = Path(__file__).resolve().parents[2] / "examples" / "programs"
KERNEL_PROGRAMS = sorted(p for p in PROGRAMS.rglob("*.json") if json.loads(p.read_text())["format"] == FORMAT)


def _matmul(b: int, m: int, n: int, k: int, split: dict[str, int]) -> dict:
    t = lambda shape, role: {"shape": shape, "dtype": "fp16", "role": role}  # noqa: E731
    lead = [b] if b > 1 else []
    dims = {"mb": m, "in": k, "out": n, **({"x": b} if b > 1 else {})}
    return {"format": FORMAT, "version": 1,
            "tensors": {"A": t(lead + [m, k], "input"), "B": t(lead + [k, n], "input"),
                        "C": t(lead + [m, n], "output")},
            "kernels": [{"name": "mm", "op": "batchmatmul", "inputs": ["A", "B"], "outputs": ["C"], "dims": dims,
                         "work_division": split}]}


CASES = [*((p.name, json.loads(p.read_text())) for p in KERNEL_PROGRAMS),
         ("split K (multicast, reduce-scatter)", _matmul(1, 64, 512, 1024, {"mb": 2, "out": 2, "in": 4})),
         ("batch blocks (strided)", _matmul(8, 64, 128, 128, {"x": 2, "mb": 4, "out": 2}))]


@pytest.fixture
def lowered(monkeypatch) -> list[dict]:
    """The unit-program data the lowering hands to the loader, each checked against the schema on the way
    (a copy: the loader makes the lowering's items into its instructions' args in place)."""
    seen: list[dict] = []
    real = lowering.parse_unit_program

    def checked(data, machine, source, schema=True):
        unit_load._check_schema(data, source)
        seen.append(copy.deepcopy(data))
        return real(data, machine, source, schema)
    monkeypatch.setattr(lowering, "parse_unit_program", checked)
    return seen


@pytest.mark.parametrize(("name", "data"), CASES, ids=[name for name, _ in CASES])
def test_lowered_programs_obey_the_schema(name, data, lowered):
    lowering.lower(parse_kernel_program(data, name), load_machine())
    assert len(lowered) == 1
    assert lowered[0]["cores"]


def test_the_schema_check_catches_a_malformed_instruction(lowered):
    lowering.lower(parse_kernel_program(CASES[-1][1], "x"), load_machine())
    data = lowered[0]
    item = next(i for c in data["cores"] for items in c["units"].values() for i in items if i["op"] == "load")
    item["bytes"] = "many"
    with pytest.raises(ProgramError, match="many"):
        unit_load._check_schema(data, "x")
