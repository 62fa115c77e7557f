"""Loading kernel programs: what is accepted, and one-line errors with JSON paths."""

import copy

import pytest

from spyre_emu.errors import ProgramError
from spyre_emu.kernel_program import parse_kernel_program
from spyre_emu.kernel_program.load import schema
from spyre_emu.kernel_program.ops import OPS

GOOD = {"format": "spyre-emu.kernel-program", "version": 1,
        "tensors": {"x": {"shape": [5, 100, 150], "dtype": "fp16", "role": "input"},
                    "y": {"shape": [5, 100, 150], "dtype": "fp16", "role": "output",
                          "layout": {"dim_order": [0, 1, 2]}}},
        "kernels": [{"name": "e", "op": "exp", "inputs": ["x"], "outputs": ["y"],
                     "dims": {"x": 5, "mb": 100, "out": 150}, "work_division": {"mb": 4}}]}


def test_good_program():
    program = parse_kernel_program(GOOD, "p.json")
    assert program.tensors["x"].layout.device_size == (100, 3, 5, 64)
    kernel = program.kernels[0]
    assert (kernel.op, kernel.slices, kernel.cores) == ("exp", {"x": 1, "mb": 4, "out": 1}, 4)


def _bad(edit):
    data = copy.deepcopy(GOOD)
    edit(data)
    with pytest.raises(ProgramError) as info:
        parse_kernel_program(data, "p.json")
    return str(info.value)


@pytest.mark.parametrize(("edit", "where", "what"), [
    (lambda d: d["kernels"][0].update(op="conv9"), "kernels[0].op", "is not one of"),
    (lambda d: d["kernels"][0].update(inputs=["nope"]), "kernels[0].inputs[0]", "unknown tensor 'nope'"),
    (lambda d: d["kernels"][0].update(inputs=["x", "x"]), "kernels[0].inputs", "exp takes 1 inputs, got 2"),
    (lambda d: d["kernels"][0]["work_division"].update(zz=2), "kernels[0].work_division.zz", "not in dims"),
    (lambda d: d["tensors"]["x"].update(dtype="fp64"), "tensors.x.dtype", "is not one of"),
    (lambda d: d["tensors"]["x"].update(shape=[0, 4]), "tensors.x.shape[0]", "less than the minimum"),
    (lambda d: d["tensors"]["y"]["layout"].update(dim_order=[0, 0, 2]), "tensors.y.layout", ""),
    (lambda d: d["tensors"]["x"].update(role="scratch"), "tensors.x.role", "is not one of"),
    (lambda d: d["kernels"][0].update(extra=1), "kernels[0]", "Additional properties"),
])
def test_bad_programs_name_the_json_path(edit, where, what):
    message = _bad(edit)
    assert message.startswith(f"p.json: {where}: ")
    assert what in message
    assert "\n" not in message


def test_schema_op_names_are_the_op_table():
    assert schema()["$defs"]["kernel"]["properties"]["op"]["enum"] == list(OPS)
