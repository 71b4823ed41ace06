"""Reading DAG files: YAML or JSON specs, and Python files written with ``schedd_sdk``.

* ``.yaml`` / ``.yml`` / ``.json`` (any suffix other than ``.py``): one spec in the protobuf
  JSON mapping of ``schedd.v1.DagSpec``. Not validated here; the server validates it.
* ``.py``: every DAG the module defines (:func:`schedd_sdk.loader.load_dags`), validated
  locally with the server's rules. The file is imported and runs in this process. Its Python
  tasks are named by module paths relative to the import root of its code bundle
  (``schedctl.bundles``), from which workers import them.

Only a regular file of at most ``MAX_FILE_BYTES`` is read, and it must be UTF-8 text without
NUL bytes: a directory, a FIFO, a device such as ``/dev/zero`` or a binary file is refused with
a message before anything is parsed (never a hang or a traceback). YAML aliases are refused
(a few lines of them can expand into gigabytes), and nesting deeper than Python can parse is
an error like any other.

:func:`load_specs` returns every spec of a file; :func:`load_spec` returns the one spec of a file
and rejects a Python file that defines more than one DAG.
"""

from __future__ import annotations

import stat
from pathlib import Path

import yaml
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb

#: Largest DAG file schedctl reads.
MAX_FILE_BYTES = 4 * 1024 * 1024


class SpecFileError(Exception):
    """The file cannot be read or does not describe a DagSpec; the message says where and why."""


def read_text_file(path: Path, max_bytes: int = MAX_FILE_BYTES) -> str:
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
    the Python files belong to (``schedd_sdk.loader.load_dags``)."""
    if not path.is_dir():
        return _load_python(path, import_root) if path.suffix == ".py" else [_load_data(path)]
    files = sorted(
        p for p in path.iterdir() if p.suffix in DAG_SUFFIXES and p.is_file() and p.name != "__init__.py"
    )
    if not files:
        raise SpecFileError(f"{path}: no DAG files ({', '.join(DAG_SUFFIXES)}) in this directory")
    specs: list[pb.DagSpec] = []
    origin: dict[str, Path] = {}
    for file in files:
        for spec in load_specs(file, import_root):
            if spec.dag_id in origin:
                raise SpecFileError(
                    f"dag {spec.dag_id!r} is defined in both {origin[spec.dag_id]} and {file}"
                )
            origin[spec.dag_id] = file
            specs.append(spec)
    return specs


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
