"""Secrets backends: where a variable or connection is looked up before the database.

Built in, in the order they are asked:

- :class:`EnvironmentBackend`: ``SCHEDD_VAR_<KEY>`` (the value) and ``SCHEDD_CONN_<ID>`` (a
  connection URI), the key or id upper-cased, as Airflow's ``AIRFLOW_VAR_``/``AIRFLOW_CONN_``;
- :class:`FilesBackend`: a directory (``SCHEDD_SECRETS_DIR``) with ``variables/<key>`` and
  ``connections/<id>`` files (a URI, or a JSON object of connection fields), as Kubernetes mounts a
  Secret as files. A trailing newline is not part of the value.

A backend answers ``None`` for a name it does not hold; the first answer wins and the database is
asked last. These are read by the process that serves the value (the registry for tasks, the api for
``schedctl``): their environment and files, never the task's. A value from a backend is not
restricted to DAGs (whoever deploys it there grants it to every DAG of the deployment) and cannot be
changed or deleted through the API. Other backends implement :class:`SecretsBackend`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from schedd_core.connections import NAME, ConnectionValue

VAR_PREFIX = "SCHEDD_VAR_"
CONN_PREFIX = "SCHEDD_CONN_"
DIR_ENV = "SCHEDD_SECRETS_DIR"


class SecretsBackend(Protocol):
    def variable(self, key: str) -> str | None: ...

    def connection(self, conn_id: str) -> ConnectionValue | None: ...


class EnvironmentBackend:
    def __init__(self, env: Mapping[str, str]) -> None:
        self._env = {k: v for k, v in env.items() if k.startswith((VAR_PREFIX, CONN_PREFIX))}

    def variable(self, key: str) -> str | None:
        return self._env.get(VAR_PREFIX + key.upper())

    def connection(self, conn_id: str) -> ConnectionValue | None:
        uri = self._env.get(CONN_PREFIX + conn_id.upper())
        return None if uri is None else ConnectionValue.from_uri(CONN_PREFIX + conn_id.upper(), uri)


class FilesBackend:
    def __init__(self, directory: str | Path) -> None:
        self._dir = Path(directory)

    def _read(self, kind: str, name: str) -> str | None:
        if not NAME.fullmatch(name) or name.startswith("."):
            return None  # never a path outside the directory
        try:
            return (self._dir / kind / name).read_text().removesuffix("\n")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def variable(self, key: str) -> str | None:
        return self._read("variables", key)

    def connection(self, conn_id: str) -> ConnectionValue | None:
        text = self._read("connections", conn_id)
        if text is None:
            return None
        field = f"{DIR_ENV}/connections/{conn_id}"
        if text.lstrip().startswith("{"):
            return ConnectionValue.from_mapping(field, json.loads(text))
        return ConnectionValue.from_uri(field, text.strip())


def backends_from_env(env: Mapping[str, str]) -> list[SecretsBackend]:
    """The built-in backends the environment configures: always the environment, and the files
    directory when ``SCHEDD_SECRETS_DIR`` names one."""
    backends: list[SecretsBackend] = [EnvironmentBackend(env)]
    if env.get(DIR_ENV):
        backends.append(FilesBackend(env[DIR_ENV]))
    return backends
