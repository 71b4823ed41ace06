"""``schedd_store.statements`` exports every statement its submodules define, and nothing else.

Callers use ``statements.NAME``; a statement added to a submodule but not imported by the package
would be invisible to them and to the guard audit (``test_statement_guards.py``), so this fails.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

from schedd_store import statements

#: Submodules that build statements rather than define them.
_BUILDERS = {"guards"}


def _defined_in(module_name: str) -> set[str]:
    """The public names a submodule assigns or defines at its top level (not those it imports)."""
    tree = ast.parse((Path(statements.__path__[0]) / f"{module_name}.py").read_text())
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
    return {name for name in names if not name.startswith("_")}


def _submodules() -> list[str]:
    return [info.name for info in pkgutil.iter_modules(statements.__path__) if info.name not in _BUILDERS]


def test_the_package_exports_every_statement_of_its_submodules() -> None:
    defined = set().union(*(_defined_in(name) for name in _submodules()))
    assert len(defined) > 150
    assert sorted(defined - set(statements.__all__)) == []
    assert sorted(set(statements.__all__) - defined - {"GUARDS", "VIA"}) == []


def test_every_exported_name_is_the_submodules_object() -> None:
    for module_name in _submodules():
        module = importlib.import_module(f"{statements.__name__}.{module_name}")
        for name in _defined_in(module_name):
            assert getattr(statements, name) is getattr(module, name), name
