"""A program is untrusted input: it reads only inside its own folder and writes only .npy files inside
--output-dir; only regular files are read; every refusal is one line and exit status 2."""

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from spyre_emu.cli import main
from tests.cli.test_fuzz import _budget
from tests.conftest import ROOT

TINY = str(ROOT / "configs" / "tiny.toml")


def _copy_program(x: dict, y: dict) -> dict:
    """y = x for 4 KB of fp16 on core 0."""
    units = {"load": [{"op": "load", "dram": "x", "lx": 0, "bytes": 4096, "signal": ["in"]}],
             "store": [{"op": "store", "lx": 0, "dram": "y", "bytes": 4096, "wait": ["in"]}]}
    return {"format": "spyre-emu.unit-program", "version": 1,
            "buffers": {"x": {"bytes": 4096, **x}, "y": {"bytes": 4096, **y}}, "cores": [{"core": 0, "units": units}]}


class Run:
    """A program in tmp/prog/, outputs into tmp/out/; ``tmp/victim.npy`` is what a program must not touch."""

    def __init__(self, tmp_path: Path, capsys):
        self.tmp, self.capsys = tmp_path, capsys
        self.folder, self.out = tmp_path / "prog", tmp_path / "out"
        self.folder.mkdir()
        self.victim = tmp_path / "victim.npy"
        np.save(self.victim, np.arange(3))

    def __call__(self, program: dict, *args: str) -> tuple[int, str]:
        path = self.folder / "p.json"
        path.write_text(json.dumps(program))
        with _budget(20):
            code = main(["run", str(path), "--quiet", "--config", TINY, "--functional", "--output-dir",
                         str(self.out), *args])
        err = self.capsys.readouterr().err
        assert code in (0, 2), err
        if code == 2:
            assert len(err.splitlines()) == 1, err
        return code, err

    def refused(self, program: dict, words: str, *args: str) -> str:
        code, err = self(program, *args)
        assert code == 2
        assert words in err, err
        np.testing.assert_array_equal(np.load(self.victim), np.arange(3))
        assert not self.out.exists() or list(self.out.iterdir()) == []
        return err


@pytest.fixture
def run(tmp_path, capsys):
    return Run(tmp_path, capsys)


@pytest.mark.parametrize("name", ["VICTIM", "../victim.npy", "sub/y.npy", "y.txt", ".npy", "..", "./y.npy"])
def test_an_output_is_a_npy_file_name_inside_the_output_dir(run, name):
    """An absolute output path or ../victim.npy replaced that file with the program's output."""
    name = str(run.victim) if name == "VICTIM" else name
    err = run.refused(_copy_program({}, {"output": name}), "buffers.y.output: expected a .npy file name")
    assert repr(name) in err


@pytest.mark.parametrize("name", ["VICTIM", "../victim.npy", "link.npy"])
def test_an_input_stays_inside_the_program_folder(run, name):
    (run.folder / "link.npy").symlink_to(run.victim)
    name = str(run.victim) if name == "VICTIM" else name
    run.refused(_copy_program({"input": name}, {"output": "y.npy"}), "buffers.x.input: input ")


def test_inputs_in_a_subfolder_and_on_the_command_line_are_read(run):
    (run.folder / "data").mkdir()
    x = (np.arange(2048) % 1024).astype(np.float16)  # DLFloat16 holds integers up to 1024 exactly
    np.save(run.folder / "data" / "x.npy", x)
    assert run(_copy_program({"input": "data/x.npy"}, {"output": "y.npy"}))[0] == 0
    np.testing.assert_array_equal(np.load(run.out / "y.npy"), x)
    np.save(run.tmp / "elsewhere.npy", -x)  # outside the program's folder, but the user named it
    assert run(_copy_program({"input": "data/x.npy"}, {"output": "y.npy"}), "--input",
               f"x={run.tmp / 'elsewhere.npy'}")[0] == 0
    np.testing.assert_array_equal(np.load(run.out / "y.npy"), -x)


@pytest.mark.parametrize("name", ["/etc/hostname", "../victim.npy"])
def test_a_kernel_program_reads_data_only_from_its_folder(run, name):
    program = json.loads((ROOT / "examples" / "programs" / "add_exp_kernels.json").read_text())
    program["tensors"]["a"]["data"] = name
    run.refused(program, "tensors.a.data: input ")


def test_a_fifo_is_refused_not_waited_on(run):
    """An input naming a FIFO (or /dev/stdin) hung forever in open()."""
    os.mkfifo(run.folder / "x.npy")
    run.refused(_copy_program({"input": "x.npy"}, {"output": "y.npy"}), "not a regular file")
    run.refused(_copy_program({}, {"output": "y.npy"}), "not a regular file", "--input", f"x={run.folder / 'x.npy'}")
    run.refused(_copy_program({}, {"output": "y.npy"}), "not a regular file", "--config", str(run.folder / "x.npy"))


def test_a_link_loop_is_refused_in_one_line(run):
    """Path.resolve raised RuntimeError on a link loop before the read could refuse it (session 40's fuzzing)."""
    (run.folder / "x.npy").symlink_to("x.npy")
    run.refused(_copy_program({"input": "x.npy"}, {"output": "y.npy"}), "Too many levels of symbolic links")


def test_a_program_that_is_a_fifo_is_refused(tmp_path, capsys):
    os.mkfifo(tmp_path / "p.json")
    with _budget(20):
        assert main(["run", str(tmp_path / "p.json")]) == 2
    assert capsys.readouterr().err == f"spyre-emu: error: {tmp_path / 'p.json'}: cannot read: not a regular file\n"


@pytest.mark.parametrize("fill", [1e300, -1e300, 1e10, [0.5, 1e39]])  # fp16 on the card: DLFloat16, to 8.6e9
def test_a_fill_outside_the_dtype_is_refused_without_a_warning(run, fill):
    """A fill of 1e300 printed numpy's RuntimeWarning (with a source line) before the run went on with inf."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run.refused(_copy_program({"fill": fill}, {"output": "y.npy"}), "buffers.x.fill: fill value ")


def test_int8_fill_range(run):
    run.refused(_copy_program({"dtype": "int8", "fill": 128}, {"dtype": "int8", "output": "y.npy"}),
                "outside the int8 range [-128, 127]")
    assert run(_copy_program({"dtype": "int8", "fill": -128}, {"dtype": "int8", "output": "y.npy"}))[0] == 0
    assert set(np.load(run.out / "y.npy").tolist()) == {-128}


@pytest.mark.parametrize("umask", [0o022, 0o077, 0o002])
def test_outputs_follow_the_umask(run, umask):
    """Outputs were created 0600 (mkstemp's mode) whatever the umask."""
    old = os.umask(umask)
    try:
        assert run(_copy_program({}, {"output": "y.npy"}), "--json", str(run.tmp / "r.json"), "--trace",
                   str(run.tmp / "t.json"))[0] == 0
    finally:
        os.umask(old)
    for path in (run.out / "y.npy", run.tmp / "r.json", run.tmp / "t.json"):
        assert path.stat().st_mode & 0o777 == 0o666 & ~umask, path
    assert (run.tmp / "t_ideal_cycles").stat().st_mode & 0o777 == 0o777 & ~umask


def test_more_steps_than_items_is_refused(run):
    """steps = 1000 on a core with 16 sticks silently ran 16 steps."""
    program = json.loads((ROOT / "examples" / "programs" / "add_exp_kernels.json").read_text())
    program["kernels"][0]["steps"] = 100000
    run.refused(program, "kernels[0].steps: 100000 steps, but a core has only ", "--config",
                str(ROOT / "configs" / "spyre.toml"))
