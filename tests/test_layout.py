"""Guards on the code's shape: module size, no torch in the simulator, imports go down the path."""

import ast
import sys
import tomllib
from pathlib import Path

from tests.conftest import load_script

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "spyre_emu"
MAX_LINES = 400
# A stage may import only what is at or below it on the path (and the shared leaves).
ORDER = ["errors", "files", "config", "numerics", "unit_program", "kernel_program", "lowering", "engine", "reference",
         "results", "host_data", "memo", "pool", "pipeline", "gemm", "host", "validation", "sweep", "serving", "cli",
         "entry"]


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _stage(path: Path) -> str:
    rel = path.relative_to(PACKAGE).parts
    return rel[0].removesuffix(".py") if rel[0] != "__init__.py" else "cli"


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names.append(("." * node.level) + (node.module or ""))
    return names


def test_modules_stay_small():
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in _modules()}
    print("\n".join(f"{n:>5}  {p}" for p, n in sorted(sizes.items(), key=lambda kv: -kv[1])))
    assert {p: n for p, n in sizes.items() if n > MAX_LINES} == {}


def test_simulator_never_imports_torch():
    for path in _modules():
        assert not [m for m in _imports(path) if m.split(".")[0] == "torch"], path


def test_imports_only_go_down_the_path():
    for path in _modules():
        mine = ORDER.index(_stage(path))
        for name in _imports(path):
            if not name.startswith("..") and not name.startswith("spyre_emu"):
                continue
            target = name.lstrip(".").removeprefix("spyre_emu.").split(".")[0] if name.startswith(
                "spyre_emu") or name.startswith("..") else None
            if target in ORDER:
                assert ORDER.index(target) <= mine, f"{path.relative_to(ROOT)} imports {name}"


def test_tests_import_the_root_conftest_by_its_package():
    """A bare ``from conftest import`` finds whichever tests/*/conftest.py pytest loaded first: it
    passes when one folder runs alone and fails collection in the whole suite."""
    bare = [p.relative_to(ROOT) for p in sorted((ROOT / "tests").rglob("*.py")) if "conftest" in _imports(p)]
    assert not bare, f"import tests.conftest instead of conftest in {bare}"


def test_every_package_is_installed():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    frontend = {".".join(("spyre_emu", *p.parent.relative_to(ROOT).parts))
                for p in (ROOT / "frontend").rglob("__init__.py")}
    assert listed == found | frontend


def test_loading_a_script_leaves_no_bytecode_beside_it(tmp_path, monkeypatch):
    """Without PYTHONDONTWRITEBYTECODE (a new user's shell), importing traces/make_traces.py wrote
    traces/__pycache__/."""
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    script = tmp_path / "make_things.py"
    script.write_text("from dataclasses import dataclass\n\n@dataclass\nclass A:\n    x: int\n\nVALUE = A(3).x\n")
    assert load_script(script).VALUE == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["make_things.py"]
