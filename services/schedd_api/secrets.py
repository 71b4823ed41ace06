"""The api's SecretsService: variables and connections as ``schedctl variables|connections`` and
the UI manage them. Writing needs ``admin`` (the role table); a value is answered only to a caller
with the ``secrets`` role (a connection's host, login and every other field are part of its value),
everyone else gets the names, descriptions and grants. No value ever
appears in an error message or the audit log (the audit records the method and its outcome only).
"""

from __future__ import annotations

import json

import grpc

from schedd.v1 import secrets_pb2 as spb, secrets_pb2_grpc
from schedd_auth import principal
from schedd_auth.roles import reads_secret_values
from schedd_core.connections import ConnectionValue, check_name, check_value
from schedd_rpc import convert
from schedd_store.secrets import CONNECTION, VARIABLE, SecretRecord, SecretStore


def _may_read_values() -> bool:
    caller = principal.current()
    return caller is not None and reads_secret_values(caller.role)


def variable_message(record: SecretRecord, *, with_value: bool) -> spb.Variable:
    return spb.Variable(
        key=record.name,
        value=record.value if with_value else "",
        description=record.description,
        dag_ids=record.dag_ids,
        update_time=convert.ts(record.updated_at),
        source=record.source,
    )


def connection_message(record: SecretRecord, *, with_value: bool) -> spb.Connection:
    message = spb.Connection(
        conn_id=record.name,
        description=record.description,
        dag_ids=record.dag_ids,
        update_time=convert.ts(record.updated_at),
        source=record.source,
    )
    if record.value and with_value:
        value = record.connection()
        message.conn_type, message.host, message.login = value.conn_type, value.host, value.login
        message.schema, message.port = value.schema, value.port
        message.password = value.password
        message.extra = json.dumps(value.extra) if value.extra else ""
    return message


def connection_value(message: spb.Connection) -> ConnectionValue:
    """The connection a SetConnection request describes (its URI, or its fields)."""
    if message.uri:
        return ConnectionValue.from_uri("connection.uri", message.uri)
    for name in ("conn_type", "host", "login", "password", "schema", "extra"):
        check_value(f"connection.{name}", getattr(message, name))
    return ConnectionValue.from_mapping(
        "connection",
        {
            "conn_type": message.conn_type,
            "host": message.host,
            "login": message.login,
            "password": message.password,
            "schema": message.schema,
            "port": message.port,
            "extra": message.extra or {},
        },
    )


class SecretsServicer(secrets_pb2_grpc.SecretsServiceServicer):
    def __init__(self, store: SecretStore) -> None:
        self._store = store

    async def SetVariable(
        self, request: spb.SetVariableRequest, context: grpc.aio.ServicerContext
    ) -> spb.Variable:
        v = request.variable
        record = await self._store.set(
            VARIABLE, v.key, v.value, description=v.description, dag_ids=list(v.dag_ids)
        )
        return variable_message(record, with_value=False)

    async def GetVariable(
        self, request: spb.GetVariableRequest, context: grpc.aio.ServicerContext
    ) -> spb.Variable:
        check_name("key", request.key)
        reveal = _may_read_values()
        return variable_message(
            await self._store.get(VARIABLE, request.key, with_value=reveal), with_value=reveal
        )

    async def ListVariables(
        self, request: spb.ListVariablesRequest, context: grpc.aio.ServicerContext
    ) -> spb.ListVariablesResponse:
        records = await self._store.list(VARIABLE)
        return spb.ListVariablesResponse(variables=[variable_message(r, with_value=False) for r in records])

    async def DeleteVariable(
        self, request: spb.DeleteVariableRequest, context: grpc.aio.ServicerContext
    ) -> spb.DeleteResponse:
        check_name("key", request.key)
        await self._store.delete(VARIABLE, request.key)
        return spb.DeleteResponse()

    async def SetConnection(
        self, request: spb.SetConnectionRequest, context: grpc.aio.ServicerContext
    ) -> spb.Connection:
        c = request.connection
        check_name("connection.conn_id", c.conn_id)
        record = await self._store.set(
            CONNECTION,
            c.conn_id,
            connection_value(c).to_json(),
            description=c.description,
            dag_ids=list(c.dag_ids),
        )
        return connection_message(record, with_value=False)

    async def GetConnection(
        self, request: spb.GetConnectionRequest, context: grpc.aio.ServicerContext
    ) -> spb.Connection:
        check_name("conn_id", request.conn_id)
        record = await self._store.get(CONNECTION, request.conn_id, with_value=True)
        return connection_message(record, with_value=_may_read_values())

    async def ListConnections(
        self, request: spb.ListConnectionsRequest, context: grpc.aio.ServicerContext
    ) -> spb.ListConnectionsResponse:
        records = await self._store.list(CONNECTION)
        return spb.ListConnectionsResponse(
            connections=[connection_message(r, with_value=False) for r in records]
        )

    async def DeleteConnection(
        self, request: spb.DeleteConnectionRequest, context: grpc.aio.ServicerContext
    ) -> spb.DeleteResponse:
        check_name("conn_id", request.conn_id)
        await self._store.delete(CONNECTION, request.conn_id)
        return spb.DeleteResponse()

    async def RotateSecrets(
        self, request: spb.RotateSecretsRequest, context: grpc.aio.ServicerContext
    ) -> spb.RotateSecretsResponse:
        counts = await self._store.rotate()
        return spb.RotateSecretsResponse(variables=counts[VARIABLE], connections=counts[CONNECTION])
