"""Variables and connections: stored encrypted, looked up in the secrets backends first.

Values are encrypted with the deployment's :class:`~schedd_auth.secret_box.SecretBox` before they
reach the database and decrypted only in the process that serves them; the database, its dumps and
its logs hold Fernet tokens. A process without a keyring can list names but neither write nor read a
stored value (``FAILED_PRECONDITION``). A name held by a backend (environment, files) is answered
from there, unrestricted, before the database is asked.

A task reads a value only through :meth:`SecretStore.read_for_attempt`, which answers only when the
asking worker holds the attempt, running (checked in the statement), and the value is granted to the
attempt's DAG (its ``dag_ids`` is empty or lists it); anything else is ``PERMISSION_DENIED`` with
the same message whether the name exists or not, so a refused task learns nothing about it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from schedd_auth.secret_backends import EnvironmentBackend, FilesBackend, SecretsBackend
from schedd_auth.secret_box import SecretBox, SecretKeyError
from schedd_core.connections import ConnectionValue, check_grants, check_name, check_value
from schedd_core.errors import NotFound, PermissionDenied
from schedd_store import statements as sql
from schedd_store.database import Engine

VARIABLE = "variable"
CONNECTION = "connection"


@dataclass(frozen=True)
class SecretRecord:
    kind: str
    name: str
    #: The variable's value, or the connection's JSON form; empty when not decrypted.
    value: str = ""
    description: str = ""
    dag_ids: list[str] = field(default_factory=list)
    updated_at: datetime | None = None
    #: "database", "environment" or "files".
    source: str = "database"

    def connection(self) -> ConnectionValue:
        return ConnectionValue.from_json(self.value) if self.value else ConnectionValue()


def _source(backend: SecretsBackend) -> str:
    if isinstance(backend, EnvironmentBackend):
        return "environment"
    return "files" if isinstance(backend, FilesBackend) else type(backend).__name__


class SecretStore:
    def __init__(
        self, engine: Engine, box: SecretBox | None, backends: list[SecretsBackend] | None = None
    ) -> None:
        self._engine = engine
        self._box = box
        self._backends = backends or []

    def _keys(self) -> SecretBox:
        if self._box is None:
            raise SecretKeyError(
                "this server has no encryption key (SCHEDD_SECRETS_KEYS): values are unavailable"
            )
        return self._box

    async def set(
        self, kind: str, name: str, value: str, *, description: str = "", dag_ids: list[str] | None = None
    ) -> SecretRecord:
        """Store (or replace) a value; ``value`` is a variable's value or a connection's JSON form."""
        field_prefix = kind
        check_name(f"{field_prefix}.{'key' if kind == VARIABLE else 'conn_id'}", name)
        check_value(f"{field_prefix}.value", value)
        check_value(f"{field_prefix}.description", description)
        grants = check_grants(f"{field_prefix}.dag_ids", list(dag_ids or []))
        token = self._keys().encrypt(value)
        statement = sql.UPSERT_VARIABLE if kind == VARIABLE else sql.UPSERT_CONNECTION
        async with self._engine.begin() as conn:
            row = (
                await conn.execute(
                    statement, {"name": name, "value": token, "description": description, "dag_ids": grants}
                )
            ).one()
        return self._record(kind, row, decrypt=False)

    async def get(self, kind: str, name: str, *, with_value: bool) -> SecretRecord:
        for backend in self._backends:
            found = self._from_backend(backend, kind, name)
            if found is not None:
                return found if with_value else SecretRecord(kind, name, source=found.source)
        statement = sql.GET_VARIABLE if kind == VARIABLE else sql.GET_CONNECTION
        async with self._engine.connect() as conn:
            row = (await conn.execute(statement, {"name": name})).one_or_none()
        if row is None:
            raise NotFound(f"{kind} {name!r} does not exist")
        return self._record(kind, row, decrypt=with_value)

    async def list(self, kind: str) -> list[SecretRecord]:
        """The stored ones, names and grants only (values are not decrypted)."""
        statement = sql.LIST_VARIABLES if kind == VARIABLE else sql.LIST_CONNECTIONS
        async with self._engine.connect() as conn:
            rows = (await conn.execute(statement)).all()
        return [self._record(kind, row, decrypt=False) for row in rows]

    async def delete(self, kind: str, name: str) -> None:
        statement = sql.DELETE_VARIABLE if kind == VARIABLE else sql.DELETE_CONNECTION
        async with self._engine.begin() as conn:
            if (await conn.execute(statement, {"name": name})).one_or_none() is None:
                raise NotFound(f"{kind} {name!r} does not exist")

    async def rotate(self) -> dict[str, int]:
        """Re-encrypt every stored value with the first key, in one transaction (all or nothing)."""
        box = self._keys()
        counts = {VARIABLE: 0, CONNECTION: 0}
        async with self._engine.begin() as conn:
            for kind, lock, update in (
                (VARIABLE, sql.LOCK_VARIABLES, sql.REENCRYPT_VARIABLE),
                (CONNECTION, sql.LOCK_CONNECTIONS, sql.REENCRYPT_CONNECTION),
            ):
                for row in (await conn.execute(lock)).all():
                    await conn.execute(update, {"name": row.name, "value": box.rotate(row.value)})
                    counts[kind] += 1
        return counts

    async def read_for_attempt(
        self, attempt_id: str, worker_id: str, kind: str, name: str
    ) -> SecretRecord | None:
        """The value a task of ``attempt_id`` (run by ``worker_id``) asked for, or None when it does
        not exist; PermissionDenied when the worker does not hold that attempt running or the value
        is not granted to the attempt's DAG."""
        refused = PermissionDenied(f"this task may not read {kind} {name!r}")
        async with self._engine.connect() as conn:
            dag_id = (
                await conn.execute(sql.ATTEMPT_DAG, {"attempt_id": attempt_id, "worker_id": worker_id})
            ).scalar()
        if dag_id is None:
            raise refused
        try:
            record = await self.get(kind, name, with_value=True)
        except NotFound:
            return None
        if record.dag_ids and dag_id not in record.dag_ids:
            raise refused
        return record

    def _from_backend(self, backend: SecretsBackend, kind: str, name: str) -> SecretRecord | None:
        if kind == VARIABLE:
            value = backend.variable(name)
            return None if value is None else SecretRecord(kind, name, value, source=_source(backend))
        connection = backend.connection(name)
        if connection is None:
            return None
        return SecretRecord(kind, name, connection.to_json(), source=_source(backend))

    def _record(self, kind: str, row: Any, *, decrypt: bool) -> SecretRecord:
        value = self._keys().decrypt(row.value) if decrypt else ""
        return SecretRecord(
            kind, row.name, value, row.description, list(row.dag_ids), row.updated_at, source="database"
        )
