"""Import paths of Python callables, as workers will import them.

A Python task or callback is named in the spec by ``package.module:qualname``; workers import
the module from their own environment (installed packages, plus their working directory, which
is the repository root) and look the name up. This module computes that path for a function
and refuses functions a worker could not find:

* a lambda or a function defined inside another function (``<locals>`` in its qualified name);
* a function whose module attribute is something else (it was renamed or shadowed);
* a function of ``__main__`` whose file is not under the current directory or a ``sys.path``
  entry (a script's functions are named by the script's file, e.g. ``examples.my_dag``).

Guaranteed: the returned path resolves, in *this* process, to the function (or to the
``@task`` wrapper around it, which calls the function when called outside a DAG definition).
Not guaranteed: that a worker's environment has the module: a worker imports it from its own
installed packages and its working directory. Keep task functions in modules that are importable
from the repository root, or installed on the workers.
"""

from __future__ import annotations

import keyword
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from schedd_sdk.errors import DagDefinitionError


def import_roots() -> list[Path]:
    """Directories a module name is derived from, in order: the current directory, then ``sys.path``.

    Workers run in the repository root and put it first on their ``sys.path``, so a file under the
    current directory is named relative to it when the loader runs from the repository root.
    """
    roots: list[Path] = []
    for entry in [os.getcwd(), *sys.path]:
        try:
            path = Path(entry or os.getcwd()).resolve()
        except (OSError, RuntimeError):
            continue
        if path not in roots and path.is_dir():
            roots.append(path)
    return roots


def locate(path: Path, roots: Iterable[Path]) -> tuple[Path, str] | None:
    """The first of ``roots`` that contains the Python file ``path`` through directories that are
    valid identifiers, and the file's dotted module name relative to it; None when none does."""
    path = path.resolve()
    for root in roots:
        try:
            rel = path.relative_to(root)
        except ValueError:
            continue
        parts = [*rel.parts[:-1], rel.stem if rel.suffix == ".py" else rel.name]
        if parts and parts[-1] == "__init__":
            parts.pop()
        if parts and all(p.isidentifier() and not keyword.iskeyword(p) for p in parts):
            return root, ".".join(parts)
    return None


def module_name_for(path: Path, roots: Iterable[Path]) -> str | None:
    """The dotted module name of ``path`` as :func:`locate` finds it, or None."""
    found = locate(path, roots)
    return found[1] if found is not None else None


def describe(func: object) -> str:
    """A short description of a callable for error messages."""
    module = getattr(func, "__module__", None) or "?"
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    return f"{module}.{name}"


def import_path(func: Callable[..., Any], *, what: str, accept: Sequence[object] = ()) -> str:
    """``module:qualname`` of ``func``, checked to resolve back to it (or to one of ``accept``).

    ``what`` names the use in error messages ("task function", "callback").
    """
    qualname = getattr(func, "__qualname__", None)
    module_name = getattr(func, "__module__", None)
    if not isinstance(qualname, str) or not isinstance(module_name, str):
        raise DagDefinitionError(
            f"{what} {func!r} has no module and qualified name: pass a function defined at the top level "
            "of a module"
        )
    if "<lambda>" in qualname:
        raise DagDefinitionError(
            f"{what} {describe(func)} is a lambda: workers import {what}s by name, so define it with "
            "`def` at the top level of a module"
        )
    if "<locals>" in qualname:
        raise DagDefinitionError(
            f"{what} {qualname.replace('.<locals>', '')!r} is defined inside another function: workers "
            f"import {what}s by name ('module:function'), so define it at the top level of a module"
        )
    module = sys.modules.get(module_name)
    if module is None:
        raise DagDefinitionError(f"{what} {describe(func)}: its module {module_name!r} is not imported")
    obj: object = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
    if not _same(obj, func, accept):
        raise DagDefinitionError(
            f"{what} {describe(func)}: {module_name}:{qualname} does not name it (the name is bound to "
            f"{obj!r}); workers import {what}s by name, so keep the function under its own name at the "
            "top level of its module"
        )
    if module_name == "__main__":
        file = getattr(module, "__file__", None)
        derived = module_name_for(Path(file), import_roots()) if isinstance(file, str) else None
        if derived is None:
            raise DagDefinitionError(
                f"{what} {qualname!r} is defined in the script being run (__main__), whose file is not under "
                "the current directory or a sys.path entry: workers cannot import it; move it to a module"
            )
        module_name = derived
    return f"{module_name}:{qualname}"


def _same(obj: object, func: object, accept: Sequence[object]) -> bool:
    seen = 0
    while obj is not None and seen < 10:
        if obj is func or any(obj is a for a in accept):
            return True
        obj = getattr(obj, "__wrapped__", None)
        seen += 1
    return False
