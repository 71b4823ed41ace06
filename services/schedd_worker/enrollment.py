"""A worker's own credential, from an enrollment token.

A worker started with an enrollment token (``SCHEDD_ENROLL_TOKEN``, or the file
``SCHEDD_ENROLL_TOKEN_FILE``; role ``enroll``) and no worker token calls
``WorkerRegistry.Enroll`` at start-up and connects with the token it gets: bound to its worker id
and to the enrollment token's queues, so no long-lived secret is shared by a pool of workers. The
token is kept in memory; with ``SCHEDD_WORKER_TOKEN_CACHE`` (a path) it is also written there
(mode 0600, with the worker id) and reused on the next start as the same worker id, instead of
enrolling again (a registry refuses a second enrollment of a worker id that has a usable token).

Guaranteed: an enrollment refused for a reason retrying cannot fix (a token that is unknown,
revoked, expired, used up, of another role; a worker id that has a token) stops the worker at
once with the registry's reason. A registry that cannot be reached is retried, the registries in
turn, for :data:`ENROLL_DEADLINE` seconds. Not guaranteed: that a cached token still works (a revoked one
is refused on every stream; delete the cache file to enroll again).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path

import grpc

from schedd.v1 import worker_pb2, worker_pb2_grpc
from schedd_core.backoff import Backoff
from schedd_rpc.tls import ClientTLS, token_metadata
from schedd_worker.config import WorkerConfig

log = logging.getLogger(__name__)

#: Seconds a worker keeps trying to reach a registry to enroll.
ENROLL_DEADLINE = 120.0
_RPC_TIMEOUT = 10.0
#: Codes worth trying again (at the next registry): the registry or its database is unreachable.
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})


class EnrollmentFailed(Exception):
    """The worker could not enroll; the message says why."""


@dataclasses.dataclass(frozen=True)
class EnrollmentSettings:
    #: The enrollment token.
    token: str
    #: Where the worker's own token is kept between starts; None: in memory only.
    cache: Path | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> EnrollmentSettings | None:
        """The settings in ``environ``; None when no enrollment token is given."""
        token = environ.get("SCHEDD_ENROLL_TOKEN", "").strip()
        path = environ.get("SCHEDD_ENROLL_TOKEN_FILE", "")
        if path:
            try:
                token = Path(path).read_text().strip()
            except OSError as exc:
                raise EnrollmentFailed(
                    f"cannot read SCHEDD_ENROLL_TOKEN_FILE {path!r}: {exc.strerror}"
                ) from None
        if not token:
            return None
        cache = environ.get("SCHEDD_WORKER_TOKEN_CACHE", "")
        return cls(token, Path(cache) if cache else None)


async def with_own_token(
    config: WorkerConfig, environ: Mapping[str, str], *, patience: float = ENROLL_DEADLINE
) -> WorkerConfig:
    """``config`` with the worker's own token when it has none and an enrollment token is given
    (see the module docstring); unchanged otherwise. ``patience``: seconds to keep trying to reach
    a registry."""
    settings = EnrollmentSettings.from_env(environ)
    if config.token or settings is None:
        return config
    cached = _read_cache(settings.cache, config.worker_id)
    if cached:
        log.info("worker %s connects with its token from %s", config.worker_id, settings.cache)
        return dataclasses.replace(config, token=cached)
    response = await enroll(config.registries, config.tls, settings.token, config.worker_id, patience)
    log.info(
        "worker %s enrolled (token %s, queues %s)", config.worker_id, response.name, list(response.queues)
    )
    if settings.cache is not None:
        write_cache(settings.cache, config.worker_id, response.token)
    return dataclasses.replace(config, token=response.token)


async def own_token_or_exit(config: WorkerConfig, environ: Mapping[str, str]) -> WorkerConfig:
    """:func:`with_own_token`, ending the process (exit status 2, the reason on stderr) when the
    worker cannot enroll."""
    try:
        return await with_own_token(config, environ)
    except EnrollmentFailed as exc:
        log.error("%s", exc)
        raise SystemExit(2) from None


async def enroll(
    registries: tuple[str, ...],
    tls: ClientTLS | None,
    enrollment_token: str,
    worker_id: str,
    patience: float = ENROLL_DEADLINE,
) -> worker_pb2.EnrollResponse:
    """Call ``Enroll`` on the registries in turn until one answers; raise :class:`EnrollmentFailed`
    on a refusal or once ``patience`` seconds passed."""
    deadline = time.monotonic() + patience
    backoff = Backoff(0.2, 5.0)
    attempt = 0
    while True:
        registry = registries[attempt % len(registries)]
        attempt += 1
        try:
            return await _enroll_at(registry, tls, enrollment_token, worker_id)
        except grpc.aio.AioRpcError as exc:
            if exc.code() not in _TRANSIENT:
                raise EnrollmentFailed(
                    f"registry {registry} refused to enroll worker {worker_id!r}: {exc.code().name}: "
                    f"{exc.details()}"
                ) from None
            if time.monotonic() + backoff.delay > deadline:
                raise EnrollmentFailed(
                    f"no registry answered within {patience:g}s to enroll worker {worker_id!r} "
                    f"(last: {registry}: {exc.details()})"
                ) from None
            log.warning("enrolling at registry %s failed (%s); trying again", registry, exc.details())
        await asyncio.sleep(backoff.take())


async def _enroll_at(
    registry: str, tls: ClientTLS | None, enrollment_token: str, worker_id: str
) -> worker_pb2.EnrollResponse:
    channel = (
        grpc.aio.insecure_channel(registry)
        if tls is None
        else grpc.aio.secure_channel(registry, tls.credentials())
    )
    async with channel:
        stub = worker_pb2_grpc.WorkerRegistryStub(channel)
        response: worker_pb2.EnrollResponse = await stub.Enroll(
            worker_pb2.EnrollRequest(worker_id=worker_id),
            metadata=token_metadata(enrollment_token),
            timeout=_RPC_TIMEOUT,
        )
        return response


def _read_cache(path: Path | None, worker_id: str) -> str:
    """The cached token of ``worker_id``; "" when there is none (or it belongs to another id)."""
    if path is None or not path.exists():
        return ""
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        log.warning("ignoring the worker token cache %s: %s", path, exc)
        return ""
    if not isinstance(cached, dict) or cached.get("worker_id") != worker_id:
        return ""
    return str(cached.get("token", ""))


def write_cache(path: Path, worker_id: str, token: str) -> None:
    """Write the token where only this user can read it (created 0600, never wider)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        os.fchmod(out.fileno(), 0o600)
        json.dump({"worker_id": worker_id, "token": token}, out)
