"""The token one :class:`~schedd_coord.client.EtcdClient` sends to etcd, and its renewal.

A :class:`TokenKeeper` asks etcd for a token (``Auth.Authenticate``) on first use and again when
etcd refuses the one it has. Concurrent callers that saw the same token refused share one renewal.
Without credentials it sends no token. Against an etcd with authentication off it sends none
either (etcd would ignore it), and asks again once etcd wants one.
"""

from __future__ import annotations

import asyncio

import grpc
from aetcd import rpc

from schedd_coord.credentials import PASSWORD_ENV, PASSWORD_FILE_ENV, USER_ENV, EtcdAuth
from schedd_coord.errors import CoordinationError, EtcdAuthFailed

#: What etcd answers a call whose token it no longer accepts (expired, or older than the users and
#: roles), or a call without a token once authentication is on.
TOKEN_REFUSED = ("invalid auth token", "revision of auth store is old", "user name is empty")
_AUTH_NOT_ENABLED = "authentication is not enabled"
_BAD_CREDENTIALS = "invalid user ID or password"

Metadata = tuple[tuple[str, str], ...]


class TokenKeeper:
    """The current token of one client (``""``: none is sent). Use from one event loop."""

    def __init__(self, channel: grpc.aio.Channel, auth: EtcdAuth | None, timeout: float) -> None:
        self._stub = rpc.AuthStub(channel)
        self._auth = auth
        self._timeout = timeout
        self._token: str | None = None  # None until etcd was asked
        self._lock = asyncio.Lock()

    @property
    def enabled(self) -> bool:
        """Whether this client has credentials (and so can renew a refused token)."""
        return self._auth is not None

    async def current(self) -> str:
        """The token to send now, asking etcd for one on first use."""
        if self._auth is None:
            return ""
        if self._token is None:
            return await self.renew(None)
        return self._token

    async def renew(self, refused: str | None) -> str:
        """A new token in place of ``refused``; when another caller renewed it meanwhile, theirs.

        Raises EtcdAuthFailed for a wrong user or password, CoordinationError when etcd cannot
        answer.
        """
        auth = self._auth
        if auth is None:
            return ""
        async with self._lock:
            if self._token is not None and self._token != refused:
                return self._token
            request = rpc.AuthenticateRequest(name=auth.user, password=auth.password)
            try:
                resp = await self._stub.Authenticate(request, timeout=self._timeout)
            except grpc.aio.AioRpcError as exc:
                details = exc.details() or ""
                if _AUTH_NOT_ENABLED in details:
                    self._token = ""
                    return ""
                if _BAD_CREDENTIALS in details:
                    raise EtcdAuthFailed(
                        f"etcd refused user {auth.user!r} and its password (check {USER_ENV} and "
                        f"{PASSWORD_ENV} or {PASSWORD_FILE_ENV})"
                    ) from exc
                unreachable = exc.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                what = "etcd unreachable" if unreachable else "etcd authentication failed"
                raise CoordinationError(f"{what}: {exc.code().name}: {details}") from exc
            self._token = str(resp.token)
            return self._token

    def refused(self, exc: grpc.aio.AioRpcError) -> bool:
        """Whether ``exc`` is etcd refusing the token, which a renewal may cure."""
        return self.enabled and any(marker in (exc.details() or "") for marker in TOKEN_REFUSED)


def metadata(token: str) -> Metadata:
    """The call metadata that carries ``token`` (none for ``""``)."""
    return (("token", token),) if token else ()
