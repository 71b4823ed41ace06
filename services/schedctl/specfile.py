"""Reading DAG files: YAML or JSON specs, and Python files written with ``schedd_sdk``.

* ``.yaml`` / ``.yml`` / ``.json`` (any suffix other than ``.py``): one spec in the protobuf
  JSON mapping of ``schedd.v1.DagSpec``. Not validated here; the server validates it.
* ``.py``: every DAG the module defines (:func:`schedd_sdk.loader.load_dags`), validated
  locally with the server's rules. The file is imported and runs in this process; run schedctl
  from the directory workers run in (the repository root) so that Python tasks are named by
  module paths workers can import.

:func:`load_specs` returns every spec of a file; :func:`load_spec` returns the one spec of a file
and rejects a Python file that defines more than one DAG.
"""

from __future__ import annotations

from pathlib import Path

import yaml
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb


class SpecFileError(Exception):
    """The file cannot be read or does not describe a DagSpec; the message says where and why."""


def load_specs(path: Path) -> list[pb.DagSpec]:
    """The specs a file describes: every DAG of a ``.py`` file, or the one spec of a YAML/JSON file."""
    if path.suffix == ".py":
        return _load_python(path)
    return [_load_data(path)]


def load_spec(path: Path) -> pb.DagSpec:
    """The one spec a file describes; a ``.py`` file must define exactly one DAG."""
    if path.suffix != ".py":
        return _load_data(path)
    specs = _load_python(path)
    if len(specs) != 1:
        ids = ", ".join(s.dag_id for s in specs)
        raise SpecFileError(f"{path}: defines {len(specs)} DAGs ({ids}); expected exactly one here")
    return specs[0]


def _load_python(path: Path) -> list[pb.DagSpec]:
    # Imported here: only Python DAG files need the SDK (and the SDK imports the file's code).
    from schedd_sdk.errors import DagLoadError
    from schedd_sdk.loader import load_dags

    try:
        return load_dags(path)
    except DagLoadError as exc:
        raise SpecFileError(str(exc)) from None


def _load_data(path: Path) -> pb.DagSpec:
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecFileError(f"{path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SpecFileError(f"{path}: not valid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SpecFileError(f"{path}: expected a mapping with dag_id and tasks at the top level")
    try:
        return json_format.ParseDict(data, pb.DagSpec())
    except json_format.ParseError as exc:
        raise SpecFileError(f"{path}: {exc}") from None
