"""Reading DAG files: YAML or JSON specs, and Python files written with ``schedd_sdk``.

* ``.yaml`` / ``.yml`` / ``.json`` (any suffix other than ``.py``): one spec in the protobuf
  JSON mapping of ``schedd.v1.DagSpec``. Not validated here; the server validates it.
* ``.py``: every DAG the module defines (:func:`schedd_sdk.loader.load_dags`), validated
  locally with the server's rules. The file is imported and runs in this process. Its Python
  tasks are named by module paths relative to the import root of its code bundle
  (``schedctl.bundles``), from which workers import them.

Only a regular file of at most ``schedd_core.limits.MAX_SPEC_FILE_BYTES`` is read, and it must be
UTF-8 text without NUL bytes: a directory, a FIFO, a device such as ``/dev/zero`` or a binary file is
refused with a message before anything is parsed (never a hang or a traceback). YAML aliases are refused
(a few lines of them can expand into gigabytes), and nesting deeper than Python can parse is
an error like any other.

:func:`load_specs` returns every spec of a file; :func:`load_spec` returns the one spec of a file
and rejects a Python file that defines more than one DAG; :func:`load_each` returns the specs of
every file of a directory that loads, and the errors of those that do not.
"""

from __future__ import annotations

import stat
from pathlib import Path

import yaml
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb
from schedd_core.limits import MAX_SPEC_FILE_BYTES


class SpecFileError(Exception):
    """The file cannot be read or does not describe a DagSpec; the message says where and why."""


def read_text_file(path: Path, max_bytes: int = MAX_SPEC_FILE_BYTES) -> str:
    """The text of a regular file of at most ``max_bytes``; SpecFileError for anything else."""
    try:
        info = path.stat()
    except OSError as exc:
        raise SpecFileError(f"{path}: {exc.strerror}") from None
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file (a FIFO, socket or device)"
        )
        raise SpecFileError(f"{path}: is {kind}; give a DAG file")
    if info.st_size > max_bytes:
        raise SpecFileError(f"{path}: is {info.st_size} bytes; a DAG file may have at most {max_bytes}")
    try:
        with path.open("rb") as f:
            data = f.read(max_bytes + 1)
    except OSError as exc:
        raise SpecFileError(f"{path}: {exc.strerror}") from None
    if len(data) > max_bytes:
        raise SpecFileError(f"{path}: is larger than {max_bytes} bytes")
    if b"\x00" in data:
        raise SpecFileError(f"{path}: contains NUL bytes; is it a binary file?")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecFileError(
            f"{path}: is not UTF-8 text ({exc.reason} at byte {exc.start}); is it binary?"
        ) from None


class _NoAliases(yaml.SafeLoader):
    def compose_node(self, parent: object, index: object) -> object:  # type: ignore[override]
        if self.check_event(yaml.events.AliasEvent):
            raise yaml.YAMLError("YAML aliases (*name) are not allowed in a DAG file")
        return super().compose_node(parent, index)  # type: ignore[arg-type]


#: What a directory given to ``dags register`` contributes: these files, not its subdirectories.
DAG_SUFFIXES = (".py", ".yaml", ".yml", ".json")


def load_specs(path: Path, import_root: Path | None = None) -> list[pb.DagSpec]:
    """The specs a file describes (every DAG of a ``.py`` file, or the one spec of a YAML/JSON
    file), or, for a directory, those of each of its DAG files in name order. Two files that
    define the same DAG id are an error naming both. ``import_root``: that of the code bundle
    the Python files belong to (``schedd_sdk.loader.load_dags``). A directory with files that do
    not load is one error listing each of them."""
    specs, errors = load_each(path, import_root)
    if errors:
        raise SpecFileError("\n".join(errors))
    return specs


def load_each(path: Path, import_root: Path | None = None) -> tuple[list[pb.DagSpec], list[str]]:
    """The specs of every file of ``path`` (a file, or a directory's DAG files in name order) that
    loads, and one message for each file that does not (naming it): unreadable, failing to import
    or compile, or defining a DAG id an earlier file defines. SpecFileError only for a directory
    without DAG files."""
    if not path.is_dir():
        return _load_file(path, import_root), []
    files = sorted(
        p for p in path.iterdir() if p.suffix in DAG_SUFFIXES and p.is_file() and p.name != "__init__.py"
    )
    if not files:
        raise SpecFileError(f"{path}: no DAG files ({', '.join(DAG_SUFFIXES)}) in this directory")
    specs: list[pb.DagSpec] = []
    errors: list[str] = []
    origin: dict[str, Path] = {}
    for file in files:
        try:
            found = _load_file(file, import_root)
        except SpecFileError as exc:
            errors.append(str(exc))
            continue
        twice = [s.dag_id for s in found if s.dag_id in origin]
        if twice:
            errors.append(f"dag {twice[0]!r} is defined in both {origin[twice[0]]} and {file}")
            continue
        origin.update((s.dag_id, file) for s in found)
        specs.extend(found)
    return specs, errors


def _load_file(path: Path, import_root: Path | None) -> list[pb.DagSpec]:
    return _load_python(path, import_root) if path.suffix == ".py" else [_load_data(path)]


def load_spec(path: Path) -> pb.DagSpec:
    """The one spec a file describes; a ``.py`` file must define exactly one DAG."""
    if path.suffix != ".py":
        return _load_data(path)
    specs = _load_python(path)
    if len(specs) != 1:
        ids = ", ".join(s.dag_id for s in specs)
        raise SpecFileError(f"{path}: defines {len(specs)} DAGs ({ids}); expected exactly one here")
    return specs[0]


def _load_python(path: Path, import_root: Path | None = None) -> list[pb.DagSpec]:
    read_text_file(path)  # a regular text file, before anything imports it
    # Imported here: only Python DAG files need the SDK (and the SDK imports the file's code).
    from schedd_sdk.errors import DagLoadError
    from schedd_sdk.loader import load_dags

    try:
        return load_dags(path, import_root)
    except DagLoadError as exc:
        raise SpecFileError(str(exc)) from None


def _load_data(path: Path) -> pb.DagSpec:
    text = read_text_file(path)
    try:
        data = yaml.load(text, Loader=_NoAliases)  # a SafeLoader that also refuses aliases
    except yaml.YAMLError as exc:
        raise SpecFileError(f"{path}: not valid YAML or JSON: {exc}") from None
    except RecursionError:
        raise SpecFileError(f"{path}: is nested too deeply") from None
    if not isinstance(data, dict):
        raise SpecFileError(f"{path}: expected a mapping with dag_id and tasks at the top level")
    try:
        return json_format.ParseDict(data, pb.DagSpec())
    except json_format.ParseError as exc:
        raise SpecFileError(f"{path}: {exc}") from None
    except RecursionError:
        raise SpecFileError(f"{path}: is nested too deeply") from None
