"""The roles and the one table of what each RPC needs.

Roles of people and automation, each including the one before: ``viewer`` (read everything),
``operator`` (also trigger, clear, cancel, mark, pause, backfill), ``admin`` (also register DAGs,
set pools, delete DAGs, runs and pools, tokens, drain workers, read the audit log, write variables
and connections), ``secrets`` (also read variable and connection values back; the other roles see
their names only). ``worker`` is a
role of its own: it may speak the worker protocol (``WorkerRegistry.Connect``, ``FetchBundle``) and
nothing else, and no other role may speak it.

:data:`METHODS` names every RPC of every schedd service with the role it needs and whether a call
is audited; ``tests/unit/test_roles.py`` fails when an RPC of the protos is missing from it, and
when the table of every RPC in docs/security.md says otherwise. An RPC that is not in the table is
refused to everyone (fail closed). Health checking and reflection are public (probes and tools call
them without a token).
"""

from __future__ import annotations

from dataclasses import dataclass

VIEWER = "viewer"
OPERATOR = "operator"
ADMIN = "admin"
SECRETS = "secrets"
WORKER = "worker"
ENROLL = "enroll"

#: Roles a token can have, in the order ``schedctl tokens create --role`` lists them.
ROLES = (VIEWER, OPERATOR, ADMIN, SECRETS, WORKER, ENROLL)
#: Roles of their own: each may call only the methods that need exactly it.
_SEPARATE = frozenset({WORKER, ENROLL})
_RANK = {VIEWER: 0, OPERATOR: 1, ADMIN: 2, SECRETS: 3}

PUBLIC_SERVICES = frozenset(
    {
        "grpc.health.v1.Health",
        "grpc.reflection.v1alpha.ServerReflection",
        "grpc.reflection.v1.ServerReflection",
    }
)


@dataclass(frozen=True)
class Access:
    role: str
    #: Whether every call is written to the audit log (every call that changes something).
    audited: bool


def _service(name: str, methods: dict[str, Access]) -> dict[str, Access]:
    return {f"/schedd.v1.{name}/{method}": access for method, access in methods.items()}


_READ = Access(VIEWER, audited=False)
_OPERATE = Access(OPERATOR, audited=True)
_ADMINISTER = Access(ADMIN, audited=True)
_ADMIN_READ = Access(ADMIN, audited=False)

METHODS: dict[str, Access] = {
    **_service(
        "DagService",
        {
            "RegisterDag": _ADMINISTER,
            "GetDag": _READ,
            "ListDags": _READ,
            "PauseDag": _OPERATE,
            "UnpauseDag": _OPERATE,
            "ListNextRuns": _READ,
            "ListDagVersions": _READ,
            "GetDagVersion": _READ,
            "ListDagVersionFiles": _READ,
            "DeleteDag": _ADMINISTER,
        },
    ),
    **_service(
        "BackfillService",
        {
            "CreateBackfill": _OPERATE,
            "GetBackfill": _READ,
            "ListBackfills": _READ,
            "PauseBackfill": _OPERATE,
            "ResumeBackfill": _OPERATE,
            "CancelBackfill": _OPERATE,
        },
    ),
    **_service(
        "RunService",
        {
            "CreateRun": _OPERATE,
            "GetRun": _READ,
            "WatchRun": _READ,
            "ListRuns": _READ,
            "GetTaskLogs": _READ,
            "CancelRun": _OPERATE,
            "WatchTaskLogs": _READ,
            "GetTaskResult": _READ,
            "DeleteRun": _ADMINISTER,
            "ClearTaskInstances": _OPERATE,
            "SetTaskInstanceState": _OPERATE,
            "ExplainTaskInstance": _READ,
            "ListTaskAttempts": _READ,
        },
    ),
    **_service("BundleService", {"UploadBundle": _ADMINISTER}),
    **_service("PoolService", {"ListPools": _READ, "SetPool": _ADMINISTER, "DeletePool": _ADMINISTER}),
    **_service("AssetService", {"CreateAssetEvent": _OPERATE, "ListAssets": _READ, "ListAssetEvents": _READ}),
    **_service("WorkerService", {"ListWorkers": _READ, "DrainWorker": _ADMINISTER}),
    **_service("ClusterService", {"GetLeader": _READ, "GetVersion": _READ}),
    **_service(
        "TokenService",
        {"CreateToken": _ADMINISTER, "ListTokens": _ADMIN_READ, "RevokeToken": _ADMINISTER},
    ),
    **_service("AuditService", {"ListAuditRecords": _ADMIN_READ}),
    # Variables and connections: a value is answered only to `secrets` (the servicer checks it).
    **_service(
        "SecretsService",
        {
            "SetVariable": _ADMINISTER,
            "GetVariable": _READ,
            "ListVariables": _READ,
            "DeleteVariable": _ADMINISTER,
            "SetConnection": _ADMINISTER,
            "GetConnection": _READ,
            "ListConnections": _READ,
            "DeleteConnection": _ADMINISTER,
            "RotateSecrets": _ADMINISTER,
        },
    ),
    # A task's read of a variable or connection, asked by its worker.
    **_service("TaskSecrets", {"ReadSecret": Access(WORKER, audited=False)}),
    # The worker protocol: authenticated when the stream opens; its messages are not audited.
    **_service(
        "WorkerRegistry",
        {
            "Connect": Access(WORKER, audited=False),
            "FetchBundle": Access(WORKER, audited=False),
            "Enroll": Access(ENROLL, audited=True),
        },
    ),
}


def is_public(method: str) -> bool:
    """Whether ``method`` (``/package.Service/Method``) needs no token."""
    return method.split("/")[1] in PUBLIC_SERVICES if method.count("/") == 2 else False


def reads_secret_values(role: str) -> bool:
    """Whether a principal with ``role`` may read variable and connection values back."""
    return role == SECRETS


def allows(role: str, needed: str) -> bool:
    """Whether a principal with ``role`` may call an RPC that needs ``needed``."""
    if needed in _SEPARATE or role in _SEPARATE:
        return role == needed
    return _RANK.get(role, -1) >= _RANK[needed]
