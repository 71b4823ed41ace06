"""Connections (how to reach an outside system: host, login, password, ...) and variables: the
values, their names and their URI form, as Airflow writes them. Pure: no I/O.

A connection's URI is Airflow's: ``<type>://<login>:<password>@<host>:<port>/<schema>?<extra>``,
each part percent-encoded; query parameters become ``extra`` (a JSON object of strings), except
``__extra__``, whose value is the whole ``extra`` as JSON.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

from schedd_core.errors import InvalidArgument

#: A variable key or connection id: letters, digits, ``_ . -``; up to 250 characters (Airflow's).
NAME = re.compile(r"[A-Za-z0-9_.\-]{1,250}", re.ASCII)
#: The longest value of a variable, or of a connection's JSON form, in characters.
MAX_VALUE_CHARS = 64 * 1024
#: The most DAG ids one variable or connection may be granted to.
MAX_GRANTS = 1000


def check_name(field_name: str, name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidArgument(field_name, "must be 1 to 250 letters, digits, '_', '.' or '-'")
    return name


def check_value(field_name: str, value: str) -> str:
    if "\x00" in value:
        raise InvalidArgument(field_name, "must not contain NUL characters")
    if len(value) > MAX_VALUE_CHARS:
        raise InvalidArgument(field_name, f"is longer than {MAX_VALUE_CHARS} characters")
    return value


def check_grants(field_name: str, dag_ids: list[str]) -> list[str]:
    """The DAG ids a value is restricted to (empty: every DAG may read it), checked and sorted."""
    if len(dag_ids) > MAX_GRANTS:
        raise InvalidArgument(field_name, f"lists more than {MAX_GRANTS} DAG ids")
    for i, dag_id in enumerate(dag_ids):
        check_name(f"{field_name}[{i}]", dag_id)
    return sorted(set(dag_ids))


@dataclass(frozen=True)
class ConnectionValue:
    conn_type: str = ""
    host: str = ""
    login: str = ""
    password: str = ""
    schema: str = ""
    port: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ConnectionValue:
        data = json.loads(text)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})

    @classmethod
    def from_mapping(cls, field_name: str, data: dict[str, Any]) -> ConnectionValue:
        """From an Airflow-style JSON object (``conn_type``, ``host``, ... or ``uri``)."""
        if "uri" in data:
            return cls.from_uri(f"{field_name}.uri", str(data["uri"]))
        unknown = sorted(set(data) - set(cls.__dataclass_fields__) - {"description"})
        if unknown:
            raise InvalidArgument(f"{field_name}.{unknown[0]}", "is not a connection field")
        port = data.get("port") or 0
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise InvalidArgument(f"{field_name}.port", "must be a port number (0 to 65535)")
        extra = data.get("extra") or {}
        if isinstance(extra, str):
            extra = _extra_json(f"{field_name}.extra", extra)
        if not isinstance(extra, dict):
            raise InvalidArgument(f"{field_name}.extra", "must be a JSON object")
        value = cls(
            **{k: str(data.get(k) or "") for k in ("conn_type", "host", "login", "password", "schema")},
            port=port,
            extra=extra,
        )
        check_value(field_name, value.to_json())
        return value

    @classmethod
    def from_uri(cls, field_name: str, uri: str) -> ConnectionValue:
        check_value(field_name, uri)
        parts = urlsplit(uri)
        if not parts.scheme:
            raise InvalidArgument(field_name, "must be a URI like 'postgres://user:pass@host:5432/db'")
        try:
            port = parts.port or 0
        except ValueError:
            raise InvalidArgument(field_name, "has a bad port") from None
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        extra: dict[str, Any] = (
            _extra_json(field_name, query["__extra__"]) if "__extra__" in query else dict(query)
        )
        return cls(
            conn_type=parts.scheme.replace("-", "_"),
            host=unquote(parts.hostname or ""),
            login=unquote(parts.username or ""),
            password=unquote(parts.password or ""),
            schema=unquote(parts.path.lstrip("/")),
            port=port,
            extra=extra,
        )

    def get_uri(self) -> str:
        auth = ""
        if self.login or self.password:
            auth = quote(self.login, safe="") + (":" + quote(self.password, safe="") if self.password else "")
            auth += "@"
        host = quote(self.host, safe="") + (f":{self.port}" if self.port else "")
        uri = f"{self.conn_type.replace('_', '-')}://{auth}{host}"
        if self.schema:
            uri += "/" + quote(self.schema, safe="")
        if self.extra:
            flat = all(isinstance(v, str) for v in self.extra.values())
            uri += "?" + (urlencode(self.extra) if flat else urlencode({"__extra__": json.dumps(self.extra)}))
        return uri

    def secrets(self) -> list[str]:
        """The parts a log must never show: the password, and the URI that contains it."""
        return [s for s in (self.password, self.get_uri() if self.password else "") if s]


def _extra_json(field_name: str, text: str) -> dict[str, Any]:
    try:
        extra = json.loads(text)
    except ValueError:
        raise InvalidArgument(field_name, "extra is not valid JSON") from None
    if not isinstance(extra, dict):
        raise InvalidArgument(field_name, "extra must be a JSON object")
    return extra
