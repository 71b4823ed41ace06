"""The registry's TaskSecrets service: a task's read of a variable or connection, asked by the
worker that runs it.

The registry holds the decryption keys; a worker never does, and a task sees only the values it asks
for and is granted. A read is answered only when the asking worker holds the attempt, running (the
statement checks it: ``schedd_store.secrets``), and the value is granted to the attempt's DAG; a
token bound to a worker id asks only as that worker. Every refusal is ``PERMISSION_DENIED`` with the
same message whether the name exists or not.
"""

from __future__ import annotations

import json
import re

import grpc

from schedd.v1 import secrets_pb2 as spb, secrets_pb2_grpc
from schedd_auth import principal
from schedd_core.connections import check_name
from schedd_core.errors import InvalidArgument, PermissionDenied
from schedd_store.secrets import CONNECTION, VARIABLE, SecretStore

_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}", re.ASCII)


class TaskSecretsServicer(secrets_pb2_grpc.TaskSecretsServicer):
    def __init__(self, store: SecretStore) -> None:
        self._store = store

    async def ReadSecret(
        self, request: spb.ReadSecretRequest, context: grpc.aio.ServicerContext
    ) -> spb.ReadSecretResponse:
        if not _UUID.fullmatch(request.attempt_id):
            raise InvalidArgument("attempt_id", "must be an attempt id (a UUID)")
        which = request.WhichOneof("name")
        if which is None:
            raise InvalidArgument("name", "needs a variable or a connection")
        kind = VARIABLE if which == "variable" else CONNECTION
        name = check_name(which, getattr(request, which))
        caller = principal.current()
        if caller is not None and caller.worker_id and caller.worker_id != request.worker_id:
            raise PermissionDenied(f"this task may not read {kind} {name!r}")
        record = await self._store.read_for_attempt(request.attempt_id, request.worker_id, kind, name)
        if record is None:
            return spb.ReadSecretResponse(found=False)
        if kind == VARIABLE:
            return spb.ReadSecretResponse(found=True, value=record.value)
        c = record.connection()
        return spb.ReadSecretResponse(
            found=True,
            value=record.value,
            connection=spb.Connection(
                conn_id=name,
                conn_type=c.conn_type,
                host=c.host,
                login=c.login,
                password=c.password,
                schema=c.schema,
                port=c.port,
                extra=json.dumps(c.extra),
            ),
        )
