"""The reference shares only the config and unit program loaders with the rest of spyre_emu."""

import ast

from tests.conftest import ROOT

SHARED = {"config", "unit_program"}


def _spyre_imports(path):
    """The spyre_emu subpackages a reference module imports (relative ``..x`` or ``spyre_emu.x``)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level >= 2:
            yield (node.module or "").split(".")[0]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("spyre_emu"):
            yield node.module.split(".")[1]
        elif isinstance(node, ast.Import):
            yield from (a.name.split(".")[1] for a in node.names if a.name.startswith("spyre_emu."))


def test_reference_imports_only_the_loaders():
    for path in sorted((ROOT / "spyre_emu" / "reference").glob("*.py")):
        assert set(_spyre_imports(path)) <= SHARED, path.name
