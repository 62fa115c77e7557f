"""Bad input to `spyre-emu run`: one stderr line naming the file and JSON path, exit 2, no output files."""

import json
import os
import stat
import subprocess
import sys

import numpy as np
import pytest

from spyre_emu.cli import main

PREFIX = "spyre-emu: error: "


def _program(units: dict | None = None, **extra) -> dict:
    """Core 0 with ``units`` (default: one 4 KB load) and a 4 KB buffer ``x``."""
    units = units if units is not None else {"load": [_load()]}
    return {"format": "spyre-emu.unit-program", "version": 1, "buffers": {"x": {"bytes": 4096}},
            "cores": [{"core": 0, "units": units}], **extra}


def _load(**fields) -> dict:
    return {"op": "load", "dram": "x", "lx": 0, "bytes": 4096, **fields}


def _store(**fields) -> dict:
    return {"op": "store", "lx": 0, "dram": "x", "bytes": 4096, **fields}


def _with_buffer(**spec) -> dict:
    data = _program()
    data["buffers"]["x"].update(spec)
    return data


class Cli:
    """Runs ``main`` in-process on a program in tmp_path, with --json/--trace into an empty out/."""

    def __init__(self, tmp_path, capsys):
        self.tmp, self.capsys = tmp_path, capsys
        self.out = tmp_path / "out"
        self.out.mkdir()
        self.prog = tmp_path / "prog.json"
        self.report, self.trace = self.out / "report.json", self.out / "trace.json"

    def __call__(self, program=None, *args, raw: bytes | None = None, outputs=True):
        if raw is not None:
            self.prog.write_bytes(raw)
        elif program is not None:
            self.prog.write_text(json.dumps(program))
        argv = ["run", str(self.prog), "--quiet", *args]
        if outputs:
            argv += ["--json", str(self.report), "--trace", str(self.trace)]
        code = main(argv)
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def fails(self, program=None, *args, raw: bytes | None = None, outputs=True) -> str:
        """Assert the house rule; return the message after the prefix."""
        code, out, err = self(program, *args, raw=raw, outputs=outputs)
        assert code == 2, err
        assert out == ""
        lines = err.splitlines()
        assert len(lines) == 1, err
        assert lines[0].startswith(PREFIX)
        assert "Traceback" not in err
        assert list(self.out.iterdir()) == []  # no report, no trace, no leftover temporary file
        return lines[0].removeprefix(PREFIX)


@pytest.fixture
def cli(tmp_path, capsys):
    return Cli(tmp_path, capsys)


def test_valid_tiny_program_writes_report(cli):
    code, out, err = cli(_program())
    assert (code, out, err) == (0, "", "")
    report = json.loads(cli.report.read_text())
    assert isinstance(report["total_cycles"], int)
    assert report["total_cycles"] > 0
    assert json.loads(cli.trace.read_text())["traceEvents"]
    assert sorted(p.name for p in cli.out.iterdir()) == ["report.json", "trace.json", "trace_ideal_cycles"]


# (program, expected JSON path, words the message must hold)
BAD_PROGRAMS = {
    "wrong format tag": (_program(format="onnx"), "format", "unknown program format 'onnx'"),
    "wrong version": (_program(version=2), "version", "1 was expected"),
    "unknown op": (_program({"load": [_load(op="frobnicate")]}), "cores[0].units.load[0].op",
                   "'frobnicate' is not one of"),
    "unknown field": (_program({"load": [_load(colour="red")]}), "cores[0].units.load[0]",
                      "'colour' was unexpected"),
    "missing field": (_program({"load": [{"op": "load", "dram": "x", "lx": 0}]}), "cores[0].units.load[0]",
                      "'bytes' is a required property"),
    "float for int": (_program({"load": [_load(bytes=4096.0)]}), "cores[0].units.load[0].bytes",
                      "not of type 'integer'"),
    "float to_core": (_program({"send": [{"op": "send", "lx": 0, "to_core": 1.0, "to_lx": 0, "bytes": 128}]}),
                      "cores[0].units.send[0].to_core", "not of type 'integer'"),
    "op on the wrong unit": (_program({"load": [{"op": "matmul", "a": 0, "b": 0, "c": 0, "rows": 8, "k": 64}]}),
                             "cores[0].units.load[0].op", "op 'matmul' cannot run on unit 'load'"),
    "bytes not whole sticks": (_program({"load": [_load(bytes=100)]}), "cores[0].units.load[0].bytes",
                               "not a whole number of 128 B sticks"),
    "dram address not aligned": (_program({"load": [_load(dram=64, bytes=128)]}), "cores[0].units.load[0].dram",
                                 "not a multiple of 128"),
    "dram address outside memory": (_program({"load": [_load(dram=128 << 30)]}), "cores[0].units.load[0].dram",
                                    "outside device memory"),
    "past a buffer's end": (_program({"load": [_load(dram="x+3968", bytes=256)]}), "cores[0].units.load[0].dram",
                            "runs past the end of buffer 'x'"),
    "offset of 5000 digits": (_program({"load": [_load(dram="x+" + "1" * 5000)]}),
                              "cores[0].units.load[0].dram", "runs past the end of buffer 'x'"),
    "lx range beyond 2 MB": (_program({"load": [_load(lx=2 * 1024 * 1024 - 1024)]}), "cores[0].units.load[0].lx",
                             "beyond the 2097152 B scratchpad"),
    "lx pattern beyond 2 MB": (_program({"load": [_load(bytes=256, lx_piece=128, lx_stride=2 * 1024 * 1024)]}),
                               "cores[0].units.load[0].lx", "beyond the 2097152 B scratchpad"),
    "lx_piece without lx_stride": (_program({"load": [_load(lx_piece=128)]}), "cores[0].units.load[0]",
                                   "needs both lx_piece and lx_stride; lx_piece alone given"),
    "lx_piece not dividing bytes": (_program({"load": [_load(bytes=384, lx_piece=256, lx_stride=256)]}),
                                    "cores[0].units.load[0].lx_piece", "divide bytes (384)"),
    "lx_stride under lx_piece": (_program({"store": [{"op": "store", "lx": 0, "dram": "x", "bytes": 512,
                                                      "lx_piece": 256, "lx_stride": 128}]}),
                                 "cores[0].units.store[0].lx_stride", "at least lx_piece (256)"),
    "unknown buffer": (_program({"load": [_load(dram="y")]}), "cores[0].units.load[0].dram", "unknown buffer 'y'"),
    "to_core out of range": (_program({"send": [{"op": "send", "lx": 0, "to_core": 32, "to_lx": 0, "bytes": 128}]}),
                             "cores[0].units.send[0].to_core", "to_core must be another core"),
    "send to its own core after an equal one elsewhere": (  # equal args share a dict, but sends are checked per core
        {**_program(), "cores": [{"core": c, "units": {"send": [{"op": "send", "lx": 0, "to_core": 1, "to_lx": 0,
                                                                 "bytes": 128}]}} for c in (0, 1)]},
        "cores[1].units.send[0].to_core", "to_core must be another core"),
    "core out of range": ({**_program(), "cores": [{"core": 32, "units": {}}]}, "cores[0].core",
                          "core 32 does not exist"),
    "wait nobody signals": (_program({"load": [_load(wait=["t"])]}), "cores[0].units.load[0].wait",
                            "waits on token 't' that no instruction signals"),
    "huge fifo-to-fifo sfu op": (_program({"sfu0": [{"op": "relu", "a": "fifo", "out": "fifo", "sticks": 1 << 70}]}),
                                 "cores[0].units.sfu0[0].sticks", "sticks in one instruction"),
    "where without c": (_program({"sfu0": [{"op": "where", "a": 0, "b": 128, "out": 256, "sticks": 1}]}),
                        "cores[0].units.sfu0[0]", "where needs operand 'c'"),
    "add with c": (_program({"sfu0": [{"op": "add", "a": 0, "b": 128, "c": 256, "out": 384, "sticks": 1}]}),
                   "cores[0].units.sfu0[0]", "add takes no operand 'c'"),
    "broadcast a fifo": (_program({"sfu0": [{"op": "neg", "a": "fifo", "a_broadcast": True, "out": 0,
                                             "sticks": 1}]}),
                         "cores[0].units.sfu0[0].a_broadcast", "a_broadcast needs operand 'a' in LX"),
    "splat a fifo": (_program({"sfu0": [{"op": "neg", "a": "fifo", "a_splat": True, "out": 0, "sticks": 1}]}),
                     "cores[0].units.sfu0[0].a_splat", "a_splat needs operand 'a' in LX"),
    "transpose of a partial block": (_program({"sfu0": [{"op": "transpose", "a": 0, "out": 8192, "sticks": 63}]}),
                                     "cores[0].units.sfu0[0].sticks", "blocks of 64 sticks of fp16"),
    "buffer addr not aligned": (_with_buffer(addr=64), "buffers.x.addr", "not a multiple of 128"),
    "buffers overlap": ({**_program(), "buffers": {"x": {"bytes": 4096, "addr": 0},
                                                  "y": {"bytes": 4096, "addr": 2048}}},
                        "buffers.y.addr", "overlaps buffer 'x'"),
    "instruction not an object": (_program({"load": [5]}), "cores[0].units.load[0]", "5 is not of type 'object'"),
    "stream not an array": (_program({"load": 5}), "cores[0].units.load", "5 is not of type 'array'"),
    "output not a file name": (_with_buffer(output=""), "buffers.x.output", "expected a .npy file name"),
    "buffer not whole sticks": (_with_buffer(bytes=100), "buffers.x.bytes", "whole number of 128 B sticks"),
}


@pytest.mark.parametrize("case", BAD_PROGRAMS)
def test_bad_program(cli, case):
    program, path, words = BAD_PROGRAMS[case]
    message = cli.fails(program)
    assert message.startswith(f"{cli.prog}: {path}: "), message
    assert words in message


@pytest.mark.parametrize(("raw", "words"), [
    (json.dumps(_program()).encode()[:60], "invalid JSON"),                      # truncated
    (b'{"format": "spyre-emu.unit-program", "note": "\xff\xfe"}', "invalid JSON"),  # not UTF-8
    (b"", "invalid JSON"),
    (b'{"format": "spyre-emu.unit-program", "version": 1, "cores": [], "note": 1' + b"0" * 5000 + b"}",
     "invalid JSON"),                                                          # int() refuses 5000 digits
    (b"[" * 100_000 + b"]" * 100_000, "invalid JSON: nested too deeply"),
    (b"[1, 2]", "unknown program format"),
], ids=["truncated", "not-utf8", "empty", "5000-digit-number", "nested-too-deeply", "not-an-object"])
def test_malformed_json(cli, raw, words):
    message = cli.fails(raw=raw)
    assert message.startswith(f"{cli.prog}: ")
    assert words in message


def test_missing_program_file(cli):
    missing = cli.prog = cli.tmp / "nope.json"
    assert cli.fails() == f"{missing}: cannot read: No such file or directory"


def test_runtime_deadlock_names_units_and_tokens(cli):
    # each unit waits on a token the other signals only after its own wait
    program = _program({"load": [_load(wait=["b"]), _load(signal=["a"])],
                        "store": [_store(wait=["a"]), _store(signal=["b"])]})
    message = cli.fails(program)
    assert message.startswith(f"{cli.prog}: deadlock")
    assert "cores[0].units.load[0] (core0.load load) waits for token 'b'" in message
    assert "cores[0].units.store[0] (core0.store store) waits for token 'a'" in message


def test_runtime_deadlock_on_a_fifo(cli):
    message = cli.fails(_program({"sfu0": [{"op": "relu", "a": "fifo", "out": 0, "sticks": 4}]}))
    assert message.startswith(f"{cli.prog}: deadlock")
    assert "cores[0].units.sfu0[0] (core0.sfu0 relu) waits for data in its FIFO" in message


def test_max_cycles_exceeded(cli):
    assert cli.fails(_program(), "--max-cycles", "10") == f"{cli.prog}: not finished after --max-cycles 10"


@pytest.mark.parametrize("value", ["0", "-5", str(1 << 70)])
def test_max_cycles_out_of_range(cli, value):
    assert cli.fails(_program(), "--max-cycles", value).startswith("--max-cycles: must be a number of cycles")


@pytest.mark.parametrize(("item", "words"), [
    ("ring.nope=3", "--set ring.nope=3: unknown key 'ring.nope'"),
    ("noequals", "--set noequals: expected KEY=VALUE"),
    ("dram.banks=3", "--set dram.banks=3: dram.banks: must be a power of two"),
    ("ring.hop_latency_cycles=3\n4", "--set ring.hop_latency_cycles=3\\n4: ring.hop_latency_cycles: expected int"),
])
def test_bad_set(cli, item, words):
    assert cli.fails(_program(), "--set", item).startswith(words)


def test_bad_config_file(cli):
    config = cli.tmp / "card.toml"
    config.write_text("[clock\n")
    assert cli.fails(_program(), "--config", str(config)).startswith(f"{config}: invalid TOML")


def test_matmul_dtype_without_pt_lanes(cli):
    program = _program({"pt0": [{"op": "matmul", "a": 0, "b": 0, "c": 0, "rows": 8, "k": 64, "dtype": "fp8"}]})
    message = cli.fails(program, "--set", "pt.lanes={fp16 = 8}")
    assert message.startswith(f"{cli.prog}: cores[0].units.pt0[0].dtype: ")
    assert "no fp8 lanes" in message


def test_functional_missing_input_option_file(cli):
    missing = cli.tmp / "nope.npy"
    message = cli.fails(_program(), "--functional", "--input", f"x={missing}")
    assert message == f"{cli.prog}: buffers.x.input: cannot read input '{missing}': No such file or directory"


def test_functional_missing_declared_input(cli):
    message = cli.fails(_with_buffer(input="nope.npy"), "--functional")
    assert message.startswith(f"{cli.prog}: buffers.x.input: cannot read input ")
    assert "nope.npy" in message


@pytest.mark.parametrize(("content", "words"), [
    (b"", "is not a .npy file"),
    (b"hello", "is not a .npy file"),  # numpy said "Cannot load file containing pickled data"
    (None, "is not a .npy file"),
    (b"\x93NUMPY\x01\x00", "cannot read input"),  # truncated: numpy's own message
], ids=["empty", "not-npy", "npz", "truncated"])
def test_functional_bad_input_file(cli, content, words):
    path = cli.tmp / "in.npy"
    if content is None:
        with path.open("wb") as handle:
            np.savez(handle, a=np.zeros(4, np.float16))
    else:
        path.write_bytes(content)
    message = cli.fails(_program(), "--functional", "--input", f"x={path}")
    assert message.startswith(f"{cli.prog}: buffers.x.input: ")
    assert words in message


@pytest.mark.parametrize(("args", "words"), [
    (["--input", "x"], "--input x: expected BUFFER=FILE.npy"),
    (["--input", "zz=a.npy"], "--input names unknown buffer 'zz'"),
])
def test_bad_input_option(cli, args, words):
    assert words in cli.fails(_program(), "--functional", *args)


def test_unwritable_trace_leaves_no_report(cli):
    code, _, err = cli(_program(), "--json", str(cli.report), "--trace", str(cli.out / "no" / "t.json"),
                       outputs=False)
    assert code == 2
    assert err == f"{PREFIX}{cli.out / 'no' / 't.json'}: cannot write: No such file or directory\n"
    assert list(cli.out.iterdir()) == []


def test_unwritable_functional_output_leaves_no_report(cli):
    (cli.tmp / "a_file").write_text("")
    message = cli.fails(_with_buffer(output="x.npy"), "--functional", "--output-dir", str(cli.tmp / "a_file"))
    assert message == f"{cli.tmp / 'a_file'}: cannot create: File exists"


def test_a_failed_write_removes_the_output_dir_it_created(cli):
    """--output-dir was created before the writes, and stayed, empty, when --json then failed (session 40's fuzzing)."""
    code, _, err = cli(_with_buffer(output="x.npy"), "--functional", "--output-dir", str(cli.out / "new" / "o"),
                       "--json", str(cli.out), outputs=False)
    assert code == 2
    assert err == f"{PREFIX}{cli.out}: cannot write: Is a directory\n"
    assert list(cli.out.iterdir()) == []


def test_an_output_that_is_a_device_is_refused_not_replaced(cli):
    """--json naming a device (here a copy of /dev/null's node) replaced the node with a regular file: as root,
    `--json /dev/null` would have done that to /dev/null (session 40)."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    device = cli.tmp / "null"
    os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    code, _, err = cli(_program(), "--json", str(device), outputs=False)
    assert (code, err) == (2, f"{PREFIX}{device}: cannot write: not a regular file (an output replaces a file)\n")
    assert stat.S_ISCHR(device.stat().st_mode)


def test_a_file_where_the_trace_folder_goes_is_refused(cli):
    """A file at OUT_ideal_cycles was moved aside and left there as a stray .old.tmp (session 40)."""
    (cli.out / "t_ideal_cycles").write_text("mine")
    code, _, err = cli(_program(), "--trace", str(cli.out / "t.json"), outputs=False)
    assert (code, err) == (2, f"{PREFIX}{cli.out / 't_ideal_cycles'}: cannot write: not a folder (the run puts one "
                              "there)\n")
    assert sorted(p.name for p in cli.out.iterdir()) == ["t_ideal_cycles"]
    assert (cli.out / "t_ideal_cycles").read_text() == "mine"


def test_report_path_is_a_directory(cli):
    code, _, err = cli(_program(), "--json", str(cli.out), outputs=False)
    assert code == 2
    assert err == f"{PREFIX}{cli.out}: cannot write: Is a directory\n"
    assert list(cli.out.iterdir()) == []


@pytest.mark.parametrize(("argv", "words"), [
    ([], "the following arguments are required: command"),
    (["simulate", "p.json"], "argument command: invalid choice: 'simulate'"),
    (["run"], "the following arguments are required: program"),
    (["run", "p.json", "--bogus"], "unrecognized arguments: --bogus"),
    (["run", "p.json", "--max-cycles", "ten"], "argument --max-cycles: invalid int value: 'ten'"),
    (["run", "p.json", "--set"], "argument --set: expected one argument"),
])
def test_usage_errors(capsys, argv, words):
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"{PREFIX}{words}")
    assert captured.err.count("\n") == 1
    assert captured.err.endswith("\n")


def test_real_process_prints_one_line(tmp_path):
    prog, report = tmp_path / "prog.json", tmp_path / "report.json"
    prog.write_text(json.dumps(_program({"load": [_load(op="frobnicate")]})))
    proc = subprocess.run([sys.executable, "-m", "spyre_emu.cli", "run", str(prog), "--json", str(report)],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
    assert proc.stderr.startswith(f"{PREFIX}{prog}: cores[0].units.load[0].op: ")
    assert not report.exists()
