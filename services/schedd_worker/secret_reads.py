"""A task's read of a variable or connection, as its worker answers it: the worker asks a registry
(``TaskSecrets.ReadSecret``) with its own token, naming the attempt the task runs as, and registers
every value it hands over with the attempt's log masking (``schedd_exec.log_masking``) before the
task receives it, so the value never reaches the stored log.

The worker holds no key and no database access: the registry decides (the worker must hold the
attempt, running; the value must be granted to the attempt's DAG). A refusal reaches the task as an
error naming the variable or connection, never a value. The registries are tried in order; one that
cannot be reached is skipped, an answer (found, not found, refused) ends the read.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import grpc

from schedd.v1 import secrets_pb2, secrets_pb2_grpc, worker_pb2
from schedd_core.connections import ConnectionValue
from schedd_exec.attempt_log import AttemptLogs
from schedd_rpc.tls import token_metadata

#: Seconds one registry has to answer.
READ_TIMEOUT = 10.0
_KINDS = ("variable", "connection")


class SecretReads:
    def __init__(
        self,
        registries: tuple[str, ...],
        token: str,
        worker_id: str,
        channel: Callable[[str], grpc.aio.Channel],
        logs: Callable[[], AttemptLogs],
    ) -> None:
        self._registries = registries
        self._token = token
        self._worker_id = worker_id
        self._channel = channel
        self._logs = logs

    async def answer(self, assignment: worker_pb2.Assignment, kind: str, name: str) -> dict[str, Any]:
        """The answer to the task of ``assignment`` asking for ``kind`` ``name``."""
        if kind not in _KINDS:
            return {"error": f"a task may ask for a variable or a connection, not {kind!r}"}
        request = secrets_pb2.ReadSecretRequest(
            attempt_id=assignment.attempt.attempt_id, worker_id=self._worker_id, **{kind: name}
        )
        response = await self._ask(request, f"{kind} {name!r}")
        if isinstance(response, str):
            return {"error": response}
        if not response.found:
            return {"found": False}
        if kind == "variable":
            values = [response.value]
            answer: dict[str, Any] = {"found": True, "value": response.value}
        else:
            c = response.connection
            extra = json.loads(c.extra) if c.extra else {}
            connection = {
                "conn_type": c.conn_type,
                "host": c.host,
                "login": c.login,
                "password": c.password,
                "schema": c.schema,
                "port": c.port,
                "extra": extra,
            }
            values = ConnectionValue.from_json(json.dumps(connection)).secrets()
            answer = {"found": True, "connection": connection}
        self._logs().add_secrets(assignment.attempt.attempt_id, values)
        return answer

    async def _ask(
        self, request: secrets_pb2.ReadSecretRequest, what: str
    ) -> secrets_pb2.ReadSecretResponse | str:
        problems = []
        for registry in self._registries:
            try:
                async with self._channel(registry) as channel:
                    response: secrets_pb2.ReadSecretResponse = await secrets_pb2_grpc.TaskSecretsStub(
                        channel
                    ).ReadSecret(request, metadata=token_metadata(self._token), timeout=READ_TIMEOUT)
                    return response
            except grpc.aio.AioRpcError as exc:
                if exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    problems.append(f"{registry}: {exc.code().name}")
                    continue
                return f"{what}: {exc.details() or exc.code().name}"
        return f"{what}: no registry answered ({'; '.join(problems) or 'none configured'})"
