"""Code bundles for ``schedctl dags register``: choosing the directory, attaching it, uploading it.

The bundle of a registration is the directory given with ``--bundle``, else the directory of the
Python DAG file registered (or the directory registered, when it holds Python files); a YAML or
JSON file alone has none. Every spec with a Python task gets the bundle's SHA-256 as
``code_bundle``; specs without Python tasks get none, so their versions do not change with code.
The archive (``schedd_exec.bundle_pack.pack``) is uploaded once per hash, streamed in pieces
of :data:`PIECE_BYTES`; the api answers "already stored" without error.

A Python task must name a module workers can import: from the bundle, or from their own
environment. A module of a package the bundle provides (its top-level name is in the bundle) that
is not itself in the bundle could not be imported by workers, and is refused here with its name;
so is a module whose file lies in the bundle but which the DAG file imported under a name that is
not its path in the bundle (``src.work`` for the ``work.py`` of a ``--bundle src/`` that is no
package): workers would look for it elsewhere. Not checked: that a module named from the workers'
environment is installed there.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.bundle_archive import BundleError
from schedd_exec.bundle_pack import PackedBundle, import_root, pack

#: Bytes of the archive sent in one upload message.
PIECE_BYTES = 1024 * 1024


def bundle_directory(path: Path, explicit: Path | None) -> Path | None:
    """The bundle of registering ``path``: ``explicit``, or the directory of its Python code."""
    if explicit is not None:
        if not explicit.is_dir():
            raise BundleError(f"--bundle {explicit}: is not a directory")
        return explicit
    if path.is_dir():
        return path if any(path.glob("*.py")) else None
    return path.parent if path.suffix == ".py" else None


def loading_root(directory: Path | None) -> Path | None:
    """Where the loader derives module names from for a bundle ``directory`` (None: no bundle)."""
    return import_root(directory) if directory is not None else None


def uses_python(spec: pb.DagSpec) -> bool:
    return any(task.HasField("python") for task in spec.tasks)


def attach(specs: list[pb.DagSpec], directory: Path) -> PackedBundle | None:
    """Pack ``directory`` and name it in every spec with Python tasks; None if no spec has any."""
    if not any(uses_python(spec) for spec in specs):
        return None
    packed = pack(directory)
    for spec in specs:
        if uses_python(spec):
            _check_targets(spec, packed, directory)
            spec.code_bundle = packed.sha256
    return packed


def upload_request(packed: PackedBundle) -> Iterator[api_pb2.UploadBundleRequest]:
    """The stream of requests uploading ``packed``: its archive in pieces of :data:`PIECE_BYTES`,
    each well under the api's message limit, the first naming the hash."""
    for offset in range(0, len(packed.archive), PIECE_BYTES):
        sha256 = packed.sha256 if offset == 0 else ""
        yield api_pb2.UploadBundleRequest(
            sha256=sha256, archive=packed.archive[offset : offset + PIECE_BYTES]
        )


def _name_in_bundle(module: str, directory: Path) -> str | None:
    """The module name workers give the file ``module`` was imported from (as this process imported
    it), when that file lies in the bundle ``directory``: its path from the bundle's import root (the
    directory, or the first ancestor that is no package); None for a module from elsewhere."""
    file = getattr(sys.modules.get(module), "__file__", None)
    if not isinstance(file, str):
        return None
    path = Path(file).resolve()
    if not path.is_relative_to(directory.resolve()):
        return None
    root = import_root(directory)
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _check_targets(spec: pb.DagSpec, packed: PackedBundle, directory: Path) -> None:
    names = set(packed.names)
    provided = {name.split("/")[0].removesuffix(".py") for name in names}
    for task in spec.tasks:
        if not task.HasField("python"):
            continue
        module = task.python.target.partition(":")[0]
        bundled_as = _name_in_bundle(module, directory)
        if bundled_as is not None and bundled_as != module:
            raise BundleError(
                f"task {task.task_id!r} of DAG {spec.dag_id!r} names {task.python.target!r}, but that "
                f"module is the bundle's {bundled_as!r} ({directory}): workers import it as "
                f"{bundled_as!r}; import it as {bundled_as!r} in the DAG file, or name the directory "
                "above as --bundle"
            )
        if module.split(".")[0] not in provided:
            continue  # from the workers' own environment
        path = module.replace(".", "/")
        if f"{path}.py" not in names and f"{path}/__init__.py" not in names:
            raise BundleError(
                f"task {task.task_id!r} of DAG {spec.dag_id!r} names {task.python.target!r}, but module "
                f"{module!r} is not in the bundle {directory} although its package is: workers could "
                "not import it. Move it into the bundle directory, or name a larger one with --bundle"
            )
