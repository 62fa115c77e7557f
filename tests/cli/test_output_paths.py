"""An output the user names that is also an input, or another output of the same command, is refused before
anything runs: one line naming the file and the option, exit 2, every file as it was. Before (found by the
session-40 fuzz harness), `run p.json --json p.json` wrote the report over the program, `import-sdsc DIR -o
DIR/sdsc_0.json` the kernel program over the SDSC it read, and `--json r.json --trace r.json` kept one of
the two."""

import json
import os
import shutil

import pytest

from spyre_emu.cli import main
from tests.conftest import ROOT, SHARED

PROGRAM = ROOT / "docs" / "examples" / "load_exp_store.json"
TINY = ROOT / "configs" / "tiny.toml"


@pytest.fixture
def folder(tmp_path):
    """p.json (a program), c.toml (a config), r.json (its report), s.toml (a sweep spec), sdsc/ (an SDSC)."""
    shutil.copy(PROGRAM, tmp_path / "p.json")
    shutil.copy(TINY, tmp_path / "c.toml")
    assert main(["run", str(tmp_path / "p.json"), "--quiet", "--json", str(tmp_path / "r.json")]) == 0
    (tmp_path / "s.toml").write_text('[task]\nkind = "program"\nprogram = "k.json"\n[space]\ndram.channels = 1\n')
    shutil.copy(ROOT / "examples" / "programs" / "add_exp_kernels.json", tmp_path / "k.json")
    if (SHARED / "sdsc-examples" / "exp").is_dir():
        shutil.copytree(SHARED / "sdsc-examples" / "exp", tmp_path / "sdsc")
    return tmp_path


CASES = [
    (["run", "p.json", "--json", "p.json"], "p.json: --json: is also the program"),
    (["run", "p.json", "--trace", "p.json"], "p.json: --trace: is also the program"),
    (["run", "p.json", "--config", "c.toml", "--json", "c.toml"], "c.toml: --json: is also --config"),
    (["run", "p.json", "--json", "t.json", "--trace", "t.json"], "t.json: --trace: is also --json"),
    (["run", "p.json", "--json", "link.json"], "link.json: --json: is also the program"),  # a link to p.json
    (["check", "p.json", "--baseline", "r.json", "--json", "r.json"], "r.json: --json: is also --baseline"),
    (["check", "p.json", "--baseline", "r.json", "--json", "p.json"], "p.json: --json: is also the program"),
    (["gemm", "--m", "64", "--n", "64", "--k", "64", "--config", "c.toml", "--json", "c.toml"],
     "c.toml: --json: is also --config"),
    (["plot", "r.json", "--kind", "gantt", "-o", "r.json"], "r.json: -o: is also the report"),
    (["sweep", "s.toml", "--output", "k.json"], "k.json: --output: is also task.program"),
    (["validate", "--only", "sustained", "--out", "v.png"], "v.png: --plot: is also --out"),
    (["validate", "--only", "sustained", "--config", "c.toml", "--out", "c.toml"], "c.toml: --out: is also --config"),
    (["serve", "--model", "granite-3.3-8b", "--json", "o.json", "--trace", "o.json"],
     "o.json: --trace: is also --json"),
    (["import-sdsc", "sdsc", "-o", "sdsc/sdsc_0.json"], "sdsc/sdsc_0.json: -o: is also the input sdsc_0.json"),
]


@pytest.mark.parametrize(("argv", "message"), CASES, ids=[" ".join(a) for a, _ in CASES])
def test_an_output_that_is_an_input_or_another_output_is_refused(folder, capsys, argv, message):
    if argv[0] == "import-sdsc" and not (folder / "sdsc").is_dir():
        pytest.skip("the SDSC examples are not here")
    os.symlink(folder / "p.json", folder / "link.json")
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code = main([*argv, *(["--quiet"] if argv[0] in ("run", "gemm", "validate") else [])])
    finally:
        os.chdir(cwd)
    err = capsys.readouterr().err
    assert code == 2, err
    assert err == f"spyre-emu: error: {message}; give {message.split(': ')[1]} another file\n"
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == before
    assert not [p for p in folder.rglob("*.tmp")]


def test_a_link_loop_among_the_paths_is_the_usual_one_line(folder, capsys):
    """Path.resolve raised RuntimeError on a link loop: distinct_outputs' first version let it through."""
    os.symlink("loop", folder / "loop")
    assert main(["gemm", "--m", "64", "--n", "64", "--k", "64", "--config", str(folder / "loop"), "--quiet"]) == 2
    assert capsys.readouterr().err.startswith(f"spyre-emu: error: {folder / 'loop'}: cannot read config: ")


def test_distinct_outputs_still_run(folder, capsys):
    assert main(["run", str(folder / "p.json"), "--quiet", "--json", str(folder / "a.json"),
                 "--trace", str(folder / "b.json")]) == 0
    assert json.loads((folder / "a.json").read_text())["total_cycles"] > 0
    assert (folder / "b_ideal_cycles").is_dir()
