"""Variables and connections as Airflow tasks read them: ``Variable.get("k", default=...)``,
``Connection.get("my_db").host``.

Inside a Python task run by a schedd worker, each read asks the worker, which asks a registry for
the task's own attempt: the value comes from a secrets backend (``SCHEDD_VAR_<KEY>``,
``SCHEDD_CONN_<ID>``, mounted files) or the database (decrypted by the registry), and only if it is
granted to the task's DAG. The worker masks every value it hands over in the task's log. A refused
read raises :class:`SecretRefused` (a ``PermissionError``), the same whether the name exists or not.
Shell tasks and code outside a worker cannot read them (:class:`ChannelUnavailable`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from schedd_core.connections import ConnectionValue
from schedd_exec.task_channel import ChannelUnavailable, SecretRefused, ask

__all__ = ["ChannelUnavailable", "Connection", "SecretRefused", "Variable"]

_MISSING: Any = object()


class Variable:
    @staticmethod
    def get(key: str, default: Any = _MISSING, *, deserialize_json: bool = False) -> Any:
        """The variable's value (parsed as JSON with ``deserialize_json``); ``default`` when it does
        not exist, else KeyError."""
        answer = ask("variable", key)
        if not answer.get("found"):
            if default is _MISSING:
                raise KeyError(f"variable {key!r} does not exist")
            return default
        value = str(answer.get("value", ""))
        return json.loads(value) if deserialize_json else value


@dataclass(frozen=True)
class Connection:
    conn_id: str
    conn_type: str = ""
    host: str = ""
    login: str = ""
    password: str = field(default="", repr=False)
    schema: str = ""
    port: int = 0
    extra: str = ""

    @property
    def extra_dejson(self) -> dict[str, Any]:
        return dict(json.loads(self.extra)) if self.extra else {}

    def get_uri(self) -> str:
        return self._value().get_uri()

    def _value(self) -> ConnectionValue:
        return ConnectionValue(
            self.conn_type, self.host, self.login, self.password, self.schema, self.port, self.extra_dejson
        )

    @classmethod
    def get(cls, conn_id: str) -> Connection:
        """The connection; KeyError when it does not exist."""
        answer = ask("connection", conn_id)
        if not answer.get("found"):
            raise KeyError(f"connection {conn_id!r} does not exist")
        c = answer.get("connection") or {}
        extra = c.get("extra") or {}
        return cls(
            conn_id=conn_id,
            conn_type=str(c.get("conn_type", "")),
            host=str(c.get("host", "")),
            login=str(c.get("login", "")),
            password=str(c.get("password", "")),
            schema=str(c.get("schema", "")),
            port=int(c.get("port") or 0),
            extra=json.dumps(extra) if extra else "",
        )

    # Airflow's name for the same lookup.
    get_connection_from_secrets = get
