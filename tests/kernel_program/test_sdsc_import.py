"""`import-sdsc`: the real torch-spyre kernels of ../shared/sdsc-examples import, and the pointwise
ones reproduce the manifest's reference op within its tolerance; tampered files fail clearly."""

import json
import os
import shutil

import numpy as np
import pytest

from spyre_emu.cli import main
from spyre_emu.errors import ProgramError
from spyre_emu.kernel_program import import_sdsc, parse_kernel_program
from spyre_emu.numerics import from_f32, to_f32
from spyre_emu.pipeline import load, run
from tests.conftest import require_shared

EXAMPLES = ["add", "add_3d", "exp", "mul_bf16", "mean_keepdim", "mm", "bmm", "softmax"]
REFERENCE = {"add": np.add, "add_3d": np.add, "exp": np.exp, "mul_bf16": np.multiply,
             "mean_keepdim": lambda x: x.mean(axis=-1, keepdims=True), "mm": np.matmul, "bmm": np.matmul,
             "softmax": lambda x: np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(
                 -1, keepdims=True)}
EXPECTED_OP = {"add": "add", "add_3d": "add", "exp": "exp", "mul_bf16": "mul", "mean_keepdim": "mean",
               "mm": "batchmatmul", "bmm": "batchmatmul", "softmax": "realdiv"}


def _examples():
    return require_shared() / "sdsc-examples"


def _manifest():
    return json.loads((_examples() / "manifest.json").read_text())["examples"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_example_imports_or_fails_clearly(name):
    program = import_sdsc(_examples() / name)
    parse_kernel_program(program, "imported.json")
    spec = _manifest()[name]
    args = _arguments(program)
    # kernel arguments are the inputs in order, then the output (the manifest's convention)
    assert [t["shape"] for t in args.values()] == [*spec["inputs"], spec["output"]]
    assert [t["role"] for t in args.values()] == ["input"] * len(spec["inputs"]) + ["output"]
    assert {t["dtype"] for t in program["tensors"].values()} == {"fp16"}  # mul_bf16 too: the files say SEN169_FP16
    kernel = program["kernels"][-1]
    assert kernel["op"] == EXPECTED_OP[name]
    assert kernel["outputs"] == [list(args)[-1]]
    assert program["kernels"][0]["inputs"] == list(args)[:-1]
    assert "DLFloat16" in program["note"]


def _arguments(program):
    """The DRAM tensors: the kernel arguments (LX intermediates are not)."""
    return {n: t for n, t in program["tensors"].items() if t.get("space", "dram") == "dram"}


def test_softmax_chains_its_lx_intermediates():
    program = import_sdsc(_examples() / "softmax")
    kernels = [(k["op"], k["inputs"], k["outputs"]) for k in program["kernels"]]
    assert kernels == [("identity", ["arg0"], ["lx2048"]), ("max", ["lx2048"], ["lx0"]),
                       ("sub", ["lx2048", "lx0"], ["lx34816"]), ("exp", ["lx34816"], ["lx2048_1"]),
                       ("sum", ["lx2048_1"], ["lx0_1"]), ("realdiv", ["lx2048_1", "lx0_1"], ["arg1"])]
    assert program["tensors"]["lx0"]["shape"] == [512, 1]
    assert {t["space"] for n, t in program["tensors"].items() if n.startswith("lx")} == {"lx"}


def test_dims_follow_the_output_host_order():
    program = import_sdsc(_examples() / "add_3d")
    (kernel,) = program["kernels"]
    assert kernel["dims"] == {"mb": 4, "x": 256, "out": 512}
    assert kernel["work_division"] == {"mb": 1, "x": 4, "out": 8}
    (mm,) = import_sdsc(_examples() / "mm")["kernels"]
    assert (mm["dims"], mm["work_division"]) == ({"mb": 512, "out": 256, "in": 1024}, {"mb": 8, "out": 4, "in": 1})
    (bmm,) = import_sdsc(_examples() / "bmm")["kernels"]
    assert list(bmm["dims"]) == ["x", "mb", "out", "in"]
    assert bmm["work_division"]["x"] == 8
    mean = import_sdsc(_examples() / "mean_keepdim")
    assert mean["kernels"][0]["dims"] == {"mb": 512, "out": 1024}
    assert "scaling_factor" in mean["note"]


def _inputs(tmp_path, program, dtype, seed=3):
    """randn rounded to the manifest's dtype, handed to the program in its own dtype."""
    rng = np.random.default_rng(seed)
    files, values = {}, []
    for name, t in program["tensors"].items():
        if t["role"] != "input":
            continue
        x = to_f32(from_f32(rng.standard_normal(t["shape"]).astype(np.float32), dtype), dtype).reshape(t["shape"])
        np.save(tmp_path / f"{name}.npy", x.astype(np.float16))
        files[name] = tmp_path / f"{name}.npy"
        values.append(x)
    return files, values


@pytest.mark.parametrize("name", sorted(REFERENCE))
def test_examples_match_the_reference(name, tmp_path, spyre):
    spec = _manifest()[name]
    program = import_sdsc(_examples() / name)
    path = tmp_path / "program.json"
    path.write_text(json.dumps(program))
    files, values = _inputs(tmp_path, program, spec["dtype"])
    result = run(load(path, spyre), spyre, functional=True, inputs=files)
    out = result.outputs[list(_arguments(program))[-1]].astype(np.float32)
    reference = to_f32(from_f32(REFERENCE[name](*values), spec["dtype"]), spec["dtype"]).reshape(out.shape)
    assert np.allclose(out, reference, atol=spec["atol"], rtol=spec["rtol"])
    assert result.report.data["total_cycles"] > 0


def _copy(tmp_path, name):
    folder = tmp_path / name
    shutil.copytree(_examples() / name, folder)
    return folder


def _edit(folder, file, change):
    path = folder / file
    data = json.loads(path.read_text())
    change(next(iter(data.values())))
    path.write_text(json.dumps(data))


def test_unknown_op_is_named(tmp_path):
    folder = _copy(tmp_path, "add")
    _edit(folder, "sdsc_0.json", lambda s: s["dscs_"][0].update(frobnicate=s["dscs_"][0].pop("add")))
    with pytest.raises(ProgramError, match="op 'frobnicate' has no entry in spyre-emu's op table"):
        import_sdsc(folder)


def test_unknown_fields_are_noted(tmp_path):
    folder = _copy(tmp_path, "exp")
    _edit(folder, "sdsc_0.json", lambda s: s.update(symbolDefinitions_={}))
    assert "symbolDefinitions_" in import_sdsc(folder)["note"]


def test_a_core_map_our_lowering_would_not_reproduce_fails(tmp_path):
    folder = _copy(tmp_path, "add_3d")

    def swap(s):
        m = s["coreIdToWkSlice_"]
        m["1"], m["2"] = m["2"], m["1"]
    _edit(folder, "sdsc_0.json", swap)
    with pytest.raises(ProgramError, match=r"coreIdToWkSlice_\.1: core 1 owns slice"):
        import_sdsc(folder)


def test_bundle_offsets_are_checked_against_the_layout(tmp_path):
    folder = _copy(tmp_path, "add_3d")
    bundle = folder / "bundle.mlir"
    bundle.write_text(bundle.read_text().replace("arith.constant 262144", "arith.constant 262272", 1))
    with pytest.raises(ProgramError, match="core 1 starts at byte 262272 in the bundle, at 262144"):
        import_sdsc(folder)


def test_a_missing_field_is_one_line(tmp_path):
    folder = _copy(tmp_path, "exp")
    _edit(folder, "sdsc_0.json", lambda s: s["dscs_"][0]["exp"].pop("N_"))
    with pytest.raises(ProgramError, match=r"sdsc_0\.json: malformed SDSC \(KeyError: 'N_'\)"):
        import_sdsc(folder)


def _bundle(folder, old: str, new: str):
    bundle = folder / "bundle.mlir"
    assert old in bundle.read_text()
    bundle.write_text(bundle.read_text().replace(old, new, 1))


@pytest.mark.parametrize(("name", "message"), [
    ("../outside.json", r"sdsc_filename: input '\.\./outside\.json' is outside the program's folder$"),
    ("/etc/hostname", r"sdsc_filename: input '/etc/hostname' is outside the program's folder$"),
    ("fifo.json", r"fifo\.json: cannot read: not a regular file"),  # was a hang: read_text waited on the FIFO
    ("deep.json", r"deep\.json: invalid JSON: nested too deeply"),  # was a RecursionError traceback
    ("loop.json", r"loop\.json: cannot read: Too many levels of symbolic links"),  # was Path.resolve's RuntimeError
])
def test_a_file_the_bundle_names_is_read_only_inside_the_folder(tmp_path, name, message):
    """bundle.mlir's sdsc_filename is untrusted: it read any file it named, blocked on a FIFO and let json's
    RecursionError through (found by the session-40 fuzz harness)."""
    folder = _copy(tmp_path, "mm")
    (tmp_path / "outside.json").write_text((folder / "sdsc_0.json").read_text())
    os.mkfifo(folder / "fifo.json")
    (folder / "deep.json").write_text("[" * 100000)
    (folder / "loop.json").symlink_to("loop.json")
    _bundle(folder, 'sdsc_filename="sdsc_0.json"', f'sdsc_filename="{name}"')
    with pytest.raises(ProgramError, match=message):
        import_sdsc(folder)


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"symbol_ids"=[-1,', '"symbol_ids"=[-1a,',
     r"bundle\.mlir: sdsc_execute\[0\]: symbol_ids must be a list of integers"),
    ("arith.constant 8192 ", "arith.constant " + "9" * 5000 + " ",
     r"bundle\.mlir: unreadable constant: Exceeds the limit"),
])
def test_a_bundle_integer_that_does_not_read_is_one_line(tmp_path, old, new, message):
    """int() of these was a ValueError traceback (found by the session-40 fuzz harness)."""
    folder = _copy(tmp_path, "mm")
    _bundle(folder, old, new)
    with pytest.raises(ProgramError, match=message):
        import_sdsc(folder)


def test_empty_folder_fails(tmp_path):
    with pytest.raises(ProgramError, match="no sdsc_"):
        import_sdsc(tmp_path)


def test_cli_writes_the_program(tmp_path, capsys):
    out = tmp_path / "program.json"
    assert main(["import-sdsc", str(_examples() / "mul_bf16"), "-o", str(out)]) == 0
    assert json.loads(out.read_text())["kernels"][0]["op"] == "mul"
    assert capsys.readouterr().err == ""


def test_cli_bad_directory_exits_2_with_one_line(tmp_path, capsys):
    out = tmp_path / "program.json"
    assert main(["import-sdsc", str(tmp_path / "missing"), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("spyre-emu: error: ")
    assert err.count("\n") == 1
    assert "not a directory" in err
    assert not out.exists()
    folder = _copy(tmp_path, "softmax")
    _edit(folder, "sdsc_1.json", lambda sdsc: sdsc["dscs_"][0]["max"]["scheduleTree_"][0][
        "startAddressCoreCorelet_"]["data_"].update({k: "4096" for k in ("[0, 0, 0]",)}))
    assert main(["import-sdsc", str(folder), "-o", str(out)]) == 2
    assert "different offsets per core" in capsys.readouterr().err
    assert not out.exists()


def test_an_lx_read_nobody_wrote_fails(tmp_path):
    folder = _copy(tmp_path, "softmax")
    _edit(folder, "sdsc_1.json", lambda sdsc: sdsc["dscs_"][0]["max"]["scheduleTree_"][0][
        "startAddressCoreCorelet_"].update(data_={f"[{c}, 0, 0]": "4096" for c in range(32)}))
    with pytest.raises(ProgramError, match=r"sdsc_1\.json: .*reads LX offset 4096 before any kernel wrote it"):
        import_sdsc(folder)
