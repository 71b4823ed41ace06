"""Loading the DAGs a Python file declares: ``load_dags(path) -> list[DagSpec]``.

The file is imported as a module and every DAG it defines at module level is collected, in the
order of the module's names: each :class:`~schedd_sdk.DAG` bound to a module-level name (an
object bound to two names counts once), and each ``@dag`` function defined in the file (not
imported into it) whose DAG is not already among them, which is called to build it. A DAG that
is not bound to a module-level name (``with DAG("x"):`` without ``as``) is not collected.

The module's name is what workers will import for the Python tasks defined in the file: its
dotted path relative to the current directory, or else to the first ``sys.path`` entry that
contains it through identifier-named directories (``examples/etl.py`` loaded from the repository
root is ``examples.etl``). Run the loader from the directory workers run in, the repository
root; for a file of a code bundle (``import_root``), names are relative to the bundle's import
root first, as workers import the bundle from there. While the file is imported, that root and
the file's own directory are put in front of ``sys.path`` (so it can import its siblings and
its packages), and the module is registered in ``sys.modules`` under its name; both are
restored afterwards. The file is executed afresh on every call. Modules it imports stay
imported, as with any import.

Errors, each a :class:`~schedd_sdk.errors.DagLoadError` whose message starts with the path: the
file is missing or not ``.py``; importing it raises (the exception and the traceback from the
file's frames); a ``@dag`` function raises; it defines no DAG; two DAGs have one id; a DAG is
invalid (the server's message, naming the field); a Python task or callback names a module that
was importable only through the file's directory being on ``sys.path`` (workers could not
import it; the message says by which name they could).

Not guaranteed: isolation. The file runs in this process with its full powers. Loads are
serialised by a lock, as they change ``sys.path`` and ``sys.modules``, but other threads see
those changes while a load runs.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import threading
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from schedd.v1 import resources_pb2 as pb
from schedd_sdk.dags import DAG, DagFunction
from schedd_sdk.errors import DagLoadError, DagValidationError
from schedd_sdk.targets import import_roots, locate, module_name_for

__all__ = ["load_dags"]

_LOCK = threading.RLock()
_SDK_DIR = str(Path(__file__).resolve().parent)
_TRACEBACK_FRAMES = 8


@dataclass(frozen=True)
class _Place:
    """Where a DAG file is imported from and under what name."""

    file: Path
    shown: str
    name: str
    #: Directories workers have on their path (current directory and sys.path before the load).
    stable_roots: tuple[Path, ...]
    #: Directories put in front of sys.path for the load: the root of the name, the file's directory.
    search: tuple[Path, ...]
    #: Those of them workers do not have on their path.
    temporary: tuple[Path, ...]
    #: The file is under no stable root: its own functions cannot be imported by workers.
    detached: bool


def load_dags(path: str | os.PathLike[str], import_root: Path | None = None) -> list[pb.DagSpec]:
    """Import the Python file ``path`` and return the specs of the DAGs it defines, validated.

    ``import_root`` is the root of the code bundle the file belongs to
    (``schedd_exec.bundle_pack.import_root``): workers put the bundle there, so module names
    are derived from it first, and it counts as a directory workers have on their path.
    """
    with _LOCK:
        place = _place(path, import_root)
        return _load(place)


def _load(place: _Place) -> list[pb.DagSpec]:
    with _importing(place) as module:
        named = _collect(module, place)
        specs: list[pb.DagSpec] = []
        owners: dict[str, str] = {}
        for var, dag in named:
            if dag.dag_id in owners:
                raise DagLoadError(
                    f"{place.shown}: two DAGs have the id {dag.dag_id!r} ({owners[dag.dag_id]} and {var}); "
                    "DAG ids must be unique"
                )
            owners[dag.dag_id] = var
            try:
                specs.append(dag.to_spec())
            except DagValidationError as exc:
                raise DagLoadError(f"{place.shown}: {exc}") from exc
        for spec in specs:
            _check_importable(spec, place)
    return specs


def _place(path: str | os.PathLike[str], import_root: Path | None = None) -> _Place:
    shown = os.fspath(path)
    file = Path(path)
    if not file.is_file():
        raise DagLoadError(f"{shown}: no such file")
    if file.suffix != ".py":
        raise DagLoadError(f"{shown}: a DAG file is a Python module ending in .py")
    file = file.resolve()
    roots = tuple(import_roots())
    if import_root is not None:
        bundle_root = import_root.resolve()
        roots = (bundle_root, *(r for r in roots if r != bundle_root))
    found = locate(file, roots)
    search: tuple[Path, ...]
    if found is None:
        stem = re.sub(r"\W", "_", file.stem, flags=re.ASCII)
        name, search = f"_schedd_dag_file_{stem}", (file.parent,)
    else:
        root, name = found
        search = tuple(dict.fromkeys([root, file.parent]))
    existing = sys.modules.get(name)
    existing_file = getattr(existing, "__file__", None) if existing is not None else None
    if existing is not None and (not isinstance(existing_file, str) or Path(existing_file).resolve() != file):
        raise DagLoadError(
            f"{shown}: would be imported as {name!r}, but that name is already the module "
            f"{existing_file or existing!r}; rename the file"
        )
    return _Place(
        file=file,
        shown=shown,
        name=name,
        stable_roots=roots,
        search=search,
        temporary=tuple(d for d in search if d not in roots),
        detached=found is None,
    )


@contextmanager
def _importing(place: _Place) -> Iterator[ModuleType]:
    saved_path = list(sys.path)
    saved_module = sys.modules.get(place.name)
    sys.path[:0] = [str(d) for d in place.search]
    try:
        parent = place.name.rpartition(".")[0]
        if parent:
            try:
                importlib.import_module(parent)
            except Exception as exc:
                raise DagLoadError(
                    f"{place.shown}: importing its package {parent!r} raised {_describe(exc)}"
                ) from exc
        spec = importlib.util.spec_from_file_location(place.name, place.file)
        if spec is None or spec.loader is None:
            raise DagLoadError(f"{place.shown}: cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[place.name] = module
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit) as exc:
            raise DagLoadError(f"{place.shown}: importing it raised {_describe(exc)}") from exc
        yield module
    finally:
        sys.path[:] = saved_path
        if saved_module is not None:
            sys.modules[place.name] = saved_module
        else:
            sys.modules.pop(place.name, None)


def _collect(module: ModuleType, place: _Place) -> list[tuple[str, DAG]]:
    names = dict(vars(module))
    built_by = {id(v.built_by) for v in names.values() if isinstance(v, DAG) and v.built_by is not None}
    seen: set[int] = set()
    found: list[tuple[str, DAG]] = []
    for var, value in names.items():
        if id(value) in seen:
            continue
        if isinstance(value, DAG):
            seen.add(id(value))
            found.append((var, value))
        elif isinstance(value, DagFunction) and value.__module__ == place.name and id(value) not in built_by:
            seen.add(id(value))
            try:
                built = value()
            except Exception as exc:
                raise DagLoadError(
                    f"{place.shown}: building DAG {value.dag_id!r} by calling {var}() raised {_describe(exc)}"
                ) from exc
            found.append((f"{var}()", built))
    if not found:
        raise DagLoadError(
            f"{place.shown}: defines no DAG: bind one to a module-level name (`with DAG(...) as my_dag:`) "
            "or define a @dag function in the file"
        )
    return found


def _check_importable(spec: pb.DagSpec, place: _Place) -> None:
    uses: list[tuple[str, str]] = [
        (f"callback of DAG {spec.dag_id!r}", c.python.target) for c in spec.on_failure
    ]
    uses += [(f"callback of DAG {spec.dag_id!r}", c.python.target) for c in spec.on_success]
    for t in spec.tasks:
        what = f"task {t.task_id!r} of DAG {spec.dag_id!r}"
        if t.HasField("python"):
            uses.append((what, t.python.target))
        for c in [*t.on_failure, *t.on_retry, *t.on_success]:
            uses.append((f"a callback of {what}", c.python.target))
    for what, target in uses:
        if not target:
            continue
        module_name = target.partition(":")[0]
        problem = _unimportable(module_name, place)
        if problem:
            raise DagLoadError(
                f"{place.shown}: {what} names {target!r}, but workers cannot import it: {problem}"
            )


def _unimportable(module_name: str, place: _Place) -> str:
    if place.detached and module_name == place.name:
        return (
            f"{place.file} is not under the current directory or a sys.path entry. Load it from the "
            "directory workers run in (the repository root), or move the function into a module workers "
            "can import"
        )
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return ""
    resolved = Path(file).resolve()
    if any(resolved in _candidates(d, module_name) for d in place.temporary) and not any(
        resolved in _candidates(r, module_name) for r in place.stable_roots
    ):
        proper = module_name_for(resolved, place.stable_roots)
        how = f"import it as {proper!r}" if proper else "move it into a module workers can import"
        return (
            f"{resolved} was imported as {module_name!r} through the DAG file's directory, which is on "
            f"sys.path only while the file loads; {how}"
        )
    return ""


def _candidates(root: Path, module_name: str) -> set[Path]:
    rel = Path(*module_name.split("."))
    return {root / rel.with_suffix(".py"), root / rel / "__init__.py"}


def _describe(exc: BaseException) -> str:
    """``Type: message`` and the traceback of the user's frames (not importlib's or the SDK's)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, SyntaxError):
        text = f"{type(exc).__name__}: {exc.msg}\n  File {exc.filename}, line {exc.lineno}:"
        if exc.text:
            text += "\n    " + exc.text.strip("\n")
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen importlib") and not f.filename.startswith(_SDK_DIR)
    ]
    if frames:
        lines = "".join(traceback.format_list(frames[-_TRACEBACK_FRAMES:])).rstrip()
        text += "\nTraceback (most recent call last, innermost frames):\n" + lines
    return text
