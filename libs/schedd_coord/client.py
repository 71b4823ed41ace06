"""A thin asyncio client for the parts of etcd's v3 API that schedd uses.

Every call carries a deadline. Errors from gRPC come out as
:class:`CoordinationError`. ``endpoints`` is a comma-separated list of
``host:port``; gRPC balances between them and fails over.

TLS: endpoints written ``https://host:port`` are reached over TLS, verified against the CA in
``SCHEDD_ETCD_CA_FILE`` (the system's roots without it), presenting ``SCHEDD_ETCD_CERT_FILE`` and
``SCHEDD_ETCD_KEY_FILE`` when etcd asks for client certificates (``--client-cert-auth``). Mixing
``http://`` and ``https://`` endpoints is refused; so is half a client certificate.

Authentication: with an :class:`EtcdAuth` (a user and its password) the client asks etcd for a
token (``Auth.Authenticate``) before its first call and sends it as the ``token`` metadata of every
call. When etcd refuses a token (a simple token expires after ``--auth-token-ttl`` of idleness;
every token is stale once users or roles change), the client authenticates again and repeats the
call once; a watch cancelled for lack of permission is tried once more with a new token. A wrong
user or password is :class:`~schedd_coord.errors.EtcdAuthFailed`, never retried. The credentials
come from ``SCHEDD_ETCD_USER`` and its password (:mod:`schedd_coord.credentials`) when not given.
Against an etcd that has authentication off, the client works without a token. A call is repeated
only when etcd refused its token, and a refused call applies nothing, so none takes effect twice.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from aetcd import rpc

from schedd_coord.credentials import EtcdAuth, read_etcd_auth
from schedd_coord.errors import CoordinationError
from schedd_coord.token import TokenKeeper, metadata

#: The reason etcd gives when it cancels a watch for lack of permission (also for a refused token).
_WATCH_DENIED = "permission denied"


@dataclass(frozen=True)
class KeyValue:
    key: bytes
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int


def parse_endpoints(endpoints: str) -> list[str]:
    """``"a:2379,http://b:2379"`` -> ``["a:2379", "b:2379"]``.

    Blank entries are skipped. Raises ValueError naming the malformed entry: no port, a port out of
    range, or a scheme other than ``http://`` and ``https://``; when schemes are mixed; or when no
    entry is left.
    """
    result = []
    schemes = set()
    for raw in endpoints.split(","):
        item = raw.strip()
        if not item:
            continue
        scheme = "http"
        if "://" in item:
            scheme, _, item = item.partition("://")
            if scheme not in ("http", "https"):
                raise ValueError(f"etcd endpoint {raw!r}: only http:// and https:// endpoints are supported")
        schemes.add(scheme)
        host, sep, port = item.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"etcd endpoint {raw!r} is not host:port")
        result.append(item)
    if not result:
        raise ValueError("no etcd endpoints given")
    if len(schemes) > 1:
        raise ValueError("etcd endpoints mix http:// and https://")
    return result


def uses_tls(endpoints: str) -> bool:
    """Whether the endpoints are ``https://`` ones."""
    return "https://" in endpoints


@dataclass(frozen=True)
class EtcdTLS:
    """The files of a TLS connection to etcd (see the module docstring)."""

    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    @staticmethod
    def from_env(env: Mapping[str, str]) -> EtcdTLS:
        tls = EtcdTLS(
            env.get("SCHEDD_ETCD_CA_FILE", ""),
            env.get("SCHEDD_ETCD_CERT_FILE", ""),
            env.get("SCHEDD_ETCD_KEY_FILE", ""),
        )
        if bool(tls.cert_file) != bool(tls.key_file):
            missing = "SCHEDD_ETCD_KEY_FILE" if tls.cert_file else "SCHEDD_ETCD_CERT_FILE"
            raise ValueError(f"{missing} is needed with the other etcd client certificate file")
        return tls

    def credentials(self) -> grpc.ChannelCredentials:
        def read(variable: str, path: str) -> bytes | None:
            if not path:
                return None
            try:
                return Path(path).read_bytes()
            except OSError as exc:
                raise ValueError(f"{variable}: cannot read {path!r}: {exc.strerror or exc}") from None

        return grpc.ssl_channel_credentials(
            root_certificates=read("SCHEDD_ETCD_CA_FILE", self.ca_file),
            private_key=read("SCHEDD_ETCD_KEY_FILE", self.key_file),
            certificate_chain=read("SCHEDD_ETCD_CERT_FILE", self.cert_file),
        )


class EtcdClient:
    def __init__(
        self,
        endpoints: str,
        *,
        timeout: float = 2.0,
        tls: EtcdTLS | None = None,
        auth: EtcdAuth | None = None,
    ) -> None:
        """``tls``: the files of an ``https://`` connection; ``auth``: the user to authenticate as.
        Both are read from ``SCHEDD_ETCD_*`` when not given."""
        targets = parse_endpoints(endpoints)
        target = targets[0] if len(targets) == 1 else "ipv4:" + ",".join(targets)
        self.timeout = timeout
        options = [
            ("grpc.lb_policy_name", "round_robin"),
            ("grpc.keepalive_time_ms", 5000),
            ("grpc.keepalive_timeout_ms", 2000),
            ("grpc.initial_reconnect_backoff_ms", 100),
            ("grpc.max_reconnect_backoff_ms", 1000),
        ]
        if uses_tls(endpoints):
            credentials = (tls or EtcdTLS.from_env(os.environ)).credentials()
            self._channel = grpc.aio.secure_channel(target, credentials, options=options)
        else:
            self._channel = grpc.aio.insecure_channel(target, options=options)
        self.kv = rpc.KVStub(self._channel)
        self.lease = rpc.LeaseStub(self._channel)
        self.watch_stub = rpc.WatchStub(self._channel)
        self.auth = rpc.AuthStub(self._channel)
        self._maintenance = rpc.MaintenanceStub(self._channel)
        #: the token this client sends (asked for on first use, renewed when etcd refuses it)
        self.tokens = TokenKeeper(self._channel, auth or read_etcd_auth(os.environ), timeout)

    async def close(self) -> None:
        await self._channel.close()

    async def unary(self, method: Callable[..., Awaitable[Any]], request: Any) -> Any:
        """Call ``method`` (a unary method of this client's stubs) with the deadline and the token.

        A refused token is renewed and the call made once more. Raises grpc.aio.AioRpcError for
        what etcd answers, CoordinationError when no token can be had.
        """
        token = await self.tokens.current()
        try:
            return await method(request, timeout=self.timeout, metadata=metadata(token))
        except grpc.aio.AioRpcError as exc:
            if not self.tokens.refused(exc):
                raise
        token = await self.tokens.renew(token)
        return await method(request, timeout=self.timeout, metadata=metadata(token))

    async def _call(self, what: str, method: Callable[..., Awaitable[Any]], request: Any) -> Any:
        try:
            return await self.unary(method, request)
        except grpc.aio.AioRpcError as exc:
            raise CoordinationError(f"{what} failed: {exc.code().name}: {exc.details()}") from exc

    async def ping(self) -> int:
        """Authenticate (when this client has credentials) and read the cluster's current revision.

        Raises EtcdAuthFailed for refused credentials, CoordinationError when etcd is unreachable.
        """
        await self.tokens.current()
        try:
            resp = await self._maintenance.Status(rpc.StatusRequest(), timeout=self.timeout)
        except grpc.aio.AioRpcError as exc:
            raise CoordinationError(f"etcd unreachable: {exc.code().name}: {exc.details()}") from exc
        return int(resp.header.revision)

    async def grant(self, ttl: int) -> int:
        resp = await self._call("lease grant", self.lease.LeaseGrant, rpc.LeaseGrantRequest(TTL=ttl))
        if resp.error:
            raise CoordinationError(f"lease grant failed: {resp.error}")
        return int(resp.ID)

    async def revoke(self, lease_id: int) -> None:
        try:
            await self.unary(self.lease.LeaseRevoke, rpc.LeaseRevokeRequest(ID=lease_id))
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.NOT_FOUND:
                raise CoordinationError(f"lease revoke failed: {exc.details()}") from exc

    async def get(self, key: bytes) -> KeyValue | None:
        resp = await self._call("get", self.kv.Range, rpc.RangeRequest(key=key))
        return _kv(resp.kvs[0]) if resp.kvs else None

    async def get_prefix(self, prefix: bytes) -> list[KeyValue]:
        resp = await self._call(
            "get", self.kv.Range, rpc.RangeRequest(key=prefix, range_end=prefix_end(prefix))
        )
        return [_kv(kv) for kv in resp.kvs]

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        resp = await self._call("put", self.kv.Put, rpc.PutRequest(key=key, value=value, lease=lease))
        return int(resp.header.revision)

    async def delete(self, key: bytes) -> bool:
        """Delete ``key``; returns whether it existed."""
        resp = await self._call("delete", self.kv.DeleteRange, rpc.DeleteRangeRequest(key=key))
        return bool(resp.deleted)

    async def create_if_absent(
        self, key: bytes, value: bytes, *, lease: int
    ) -> tuple[bool, int, KeyValue | None]:
        """One transaction: put ``key`` only if it does not exist.

        Returns ``(created, revision, current)``: when created, ``revision`` is the key's
        create revision; otherwise ``current`` is the existing key.
        """
        txn = rpc.TxnRequest(
            compare=[
                rpc.Compare(key=key, target=rpc.Compare.CREATE, result=rpc.Compare.EQUAL, create_revision=0)
            ],
            success=[rpc.RequestOp(request_put=rpc.PutRequest(key=key, value=value, lease=lease))],
            failure=[rpc.RequestOp(request_range=rpc.RangeRequest(key=key))],
        )
        resp = await self._call("transaction", self.kv.Txn, txn)
        if resp.succeeded:
            return True, int(resp.header.revision), None
        kvs = resp.responses[0].response_range.kvs
        return False, int(resp.header.revision), (_kv(kvs[0]) if kvs else None)

    async def delete_if_created_at(self, key: bytes, create_revision: int) -> bool:
        """Delete ``key`` only if it is still the incarnation created at ``create_revision``."""
        txn = rpc.TxnRequest(
            compare=[
                rpc.Compare(
                    key=key,
                    target=rpc.Compare.CREATE,
                    result=rpc.Compare.EQUAL,
                    create_revision=create_revision,
                )
            ],
            success=[rpc.RequestOp(request_delete_range=rpc.DeleteRangeRequest(key=key))],
        )
        resp = await self._call("transaction", self.kv.Txn, txn)
        return bool(resp.succeeded)

    async def watch(
        self, key: bytes, *, start_revision: int, prefix: bool = False
    ) -> AsyncGenerator[list[tuple[str, KeyValue]]]:
        """Yield batches of ``("put" | "delete", kv)`` events on ``key`` (or the prefix) from
        ``start_revision`` on, until cancelled. A watch etcd refuses for lack of permission is
        tried once more with a renewed token (the refusal may be of a stale token)."""
        create = rpc.WatchCreateRequest(key=key, start_revision=start_revision)
        if prefix:
            create.range_end = prefix_end(key)
        token = await self.tokens.current()
        try:
            async for batch in self._watch_once(create, token):
                yield batch
        except _WatchDenied:
            token = await self.tokens.renew(token)
            async for batch in self._watch_once(create, token, last_try=True):
                yield batch

    async def _watch_once(
        self, create: rpc.WatchCreateRequest, token: str, *, last_try: bool = False
    ) -> AsyncIterator[list[tuple[str, KeyValue]]]:
        async def requests() -> AsyncIterator[rpc.WatchRequest]:
            yield rpc.WatchRequest(create_request=create)
            # Keep the request stream open for as long as the watch lives.
            await _forever()

        call = self.watch_stub.Watch(requests(), metadata=metadata(token))
        try:
            async for resp in call:
                if resp.canceled:
                    denied = _WATCH_DENIED in resp.cancel_reason
                    if denied and self.tokens.enabled and not last_try:
                        raise _WatchDenied()
                    raise CoordinationError(f"watch cancelled by etcd: {resp.cancel_reason}")
                if resp.events:
                    yield [
                        ("delete" if ev.type == rpc.Event.DELETE else "put", _kv(ev.kv)) for ev in resp.events
                    ]
        except grpc.aio.AioRpcError as exc:
            raise CoordinationError(f"watch failed: {exc.code().name}: {exc.details()}") from exc
        finally:
            call.cancel()


class _WatchDenied(Exception):
    """etcd cancelled a watch for lack of permission before it delivered anything."""


async def _forever() -> None:
    await asyncio.Event().wait()


def prefix_end(prefix: bytes) -> bytes:
    """The range end that covers every key starting with ``prefix``."""
    b = bytearray(prefix)
    for i in range(len(b) - 1, -1, -1):
        if b[i] < 0xFF:
            b[i] += 1
            return bytes(b[: i + 1])
    return b"\0"


def _kv(kv: rpc.KeyValue) -> KeyValue:
    return KeyValue(
        key=kv.key,
        value=kv.value,
        create_revision=int(kv.create_revision),
        mod_revision=int(kv.mod_revision),
        lease=int(kv.lease),
    )
