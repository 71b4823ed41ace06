"""Reading DAG spec files: YAML or JSON in the protobuf JSON mapping of ``schedd.v1.DagSpec``."""

from __future__ import annotations

from pathlib import Path

import yaml
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb


class SpecFileError(Exception):
    """The file cannot be read or does not describe a DagSpec; the message says where and why."""


def load_spec(path: Path) -> pb.DagSpec:
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
