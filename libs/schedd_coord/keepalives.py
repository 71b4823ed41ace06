"""How the lease thread sends keep-alives: over etcd's JSON gateway, or over gRPC where the
gateway cannot answer.

A keep-alive over gRPC's asyncio API passes through gRPC's event-engine threads, its poller and
every event loop of the process (the poller wakes them all): about 1 ms of CPU per keep-alive more
than one blocking HTTP/1.1 request on a kept connection to the gateway etcd serves on its client
port (``POST /v3/lease/keepalive``, etcd 3.4 and later). For an otherwise idle process the
keep-alives are most of what it does, so :class:`KeepAlives` sends them that way.

Some etcd members cannot answer through the gateway although they answer gRPC: one started with
``--enable-grpc-gateway=false``, or with ``--client-cert-auth`` and a server certificate without
the client-authentication usage (the gateway presents it to its own member). A keep-alive that
fails over HTTP is sent once more over gRPC; when that is answered, the lease's keep-alives go over
gRPC (blocking, one short stream each) from then on.

etcd checks no permission for a keep-alive (3.4, 3.5): none is sent; the lease's grant and revoke
go through the authenticated client. ``https://`` endpoints are reached over TLS with the files of
:class:`~schedd_coord.client.EtcdTLS` (verified against its CA, presenting its client certificate
when it has one).

What is guaranteed: ``keep_alive`` returns the TTL etcd granted (0 or less when the lease is gone)
or raises :class:`KeepAliveFailed`; each attempt waits at most ``timeout`` (connect, send and read
each for HTTP; the whole call for gRPC). After an HTTP failure the next request connects to the
next endpoint; one on a connection kept from before is tried again on a new one.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import ssl
import time

import grpc
import httptools
from aetcd import rpc

from schedd_coord.client import EtcdTLS, parse_endpoints, uses_tls

log = logging.getLogger(__name__)

#: One keep-alive request to the gateway at ``Host``, with its JSON body.
_REQUEST = (
    "POST /v3/lease/keepalive HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
    "Content-Length: {length}\r\n\r\n{body}"
)
_RECEIVE_BYTES = 65536


class KeepAliveFailed(Exception):
    """A keep-alive got no answer (unreachable, timed out, or an answer that is not etcd's)."""


class _Answer:
    """One HTTP response, fed to httptools as it arrives."""

    def __init__(self) -> None:
        self.body = bytearray()
        self.complete = False
        #: Whether the connection may carry the next request (read when the message completes: the
        #: parser forgets it once it is reset for the next one).
        self.keep_alive = False
        self.parser = httptools.HttpResponseParser(self)

    def on_body(self, body: bytes) -> None:
        self.body += body

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()


class HttpKeepAlive:
    """Keep-alives over a kept HTTP/1.1 connection to etcd's JSON gateway; use from one thread.

    The request is written to the socket as it is and the answer parsed with httptools (llhttp's
    parser): about half the CPU of ``http.client`` (0.3 against 0.6 ms per keep-alive, measured
    spaced as the lease thread sends them)."""

    def __init__(self, endpoints: str, tls: EtcdTLS) -> None:
        self._targets = parse_endpoints(endpoints)
        self._context = _tls_context(tls) if uses_tls(endpoints) else None
        self._next_target = 0
        self._socket: socket.socket | None = None
        self._host = ""

    def keep_alive(self, lease_id: int, timeout: float) -> int:
        """A failure on a connection kept from before (etcd restarted, an idle connection closed) is
        tried once more on a new one, within the same ``timeout``."""
        started, reused = time.monotonic(), self._socket is not None
        try:
            return self._send(lease_id, timeout)
        except KeepAliveFailed:
            left = timeout - (time.monotonic() - started)
            if not reused or left <= 0:
                raise
        return self._send(lease_id, left)

    def _send(self, lease_id: int, timeout: float) -> int:
        body = json.dumps({"ID": str(lease_id)})
        try:
            sock = self._connect(timeout)
            sock.settimeout(timeout)
            sock.sendall(_REQUEST.format(host=self._host, length=len(body), body=body).encode())
            answer = _Answer()
            while not answer.complete:
                data = sock.recv(_RECEIVE_BYTES)
                if not data:
                    raise ConnectionResetError("etcd closed the connection")
                answer.parser.feed_data(data)
                if len(answer.body) > _RECEIVE_BYTES:
                    raise ValueError("an answer longer than any keep-alive's")
            if not answer.keep_alive:
                self.close()
        except (OSError, ValueError, httptools.HttpParserError) as exc:
            self.close()
            raise KeepAliveFailed(f"keep-alive to etcd failed: {exc}") from exc
        return _granted_ttl(answer.parser.get_status_code(), bytes(answer.body))

    def close(self) -> None:
        """Drop the connection; the next keep-alive connects to the next endpoint."""
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
            self._socket = None

    def _connect(self, timeout: float) -> socket.socket:
        if self._socket is None:
            target = self._targets[self._next_target]
            self._next_target = (self._next_target + 1) % len(self._targets)
            host, _, port = target.rpartition(":")
            host = host.removeprefix("[").removesuffix("]")  # an IPv6 address: [::1]:2379
            sock = socket.create_connection((host, int(port)), timeout)
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self._context is not None:
                    sock = self._context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
            self._socket, self._host = sock, target
        return self._socket


class GrpcKeepAlive:
    """Keep-alives over gRPC's blocking API, one stream of one request each (so that each has a
    deadline); use from one thread."""

    def __init__(self, endpoints: str, tls: EtcdTLS) -> None:
        targets = parse_endpoints(endpoints)
        target = targets[0] if len(targets) == 1 else "ipv4:" + ",".join(targets)
        options = [("grpc.lb_policy_name", "round_robin")]
        if uses_tls(endpoints):
            self._channel = grpc.secure_channel(target, tls.credentials(), options=options)
        else:
            self._channel = grpc.insecure_channel(target, options=options)
        self._stub = rpc.LeaseStub(self._channel)

    def keep_alive(self, lease_id: int, timeout: float) -> int:
        call = self._stub.LeaseKeepAlive(iter([rpc.LeaseKeepAliveRequest(ID=lease_id)]), timeout=timeout)
        try:
            for answer in call:
                return int(answer.TTL)
        except grpc.RpcError as exc:
            raise KeepAliveFailed(f"keep-alive to etcd over gRPC failed: {exc}") from exc
        finally:
            call.cancel()
        raise KeepAliveFailed("etcd ended the keep-alive stream without an answer")

    def close(self) -> None:
        self._channel.close()


class KeepAlives:
    """The keep-alives of one lease: over HTTP, or over gRPC once a keep-alive that failed over
    HTTP was answered over gRPC (see the module's docstring); use from one thread."""

    def __init__(self, endpoints: str, tls: EtcdTLS | None = None) -> None:
        """``tls``: the files of ``https://`` endpoints (read from ``SCHEDD_ETCD_*`` when None)."""
        self._endpoints = endpoints
        self._tls = tls or EtcdTLS.from_env(os.environ)
        self._http = HttpKeepAlive(endpoints, self._tls)
        self._grpc: GrpcKeepAlive | None = None
        self.over_grpc = False

    def keep_alive(self, lease_id: int, timeout: float) -> int:
        """Renew ``lease_id``; the TTL etcd granted, 0 or less when the lease no longer exists."""
        if self.over_grpc:
            return self._grpc_keep_alive(lease_id, timeout)
        started = time.monotonic()
        try:
            return self._http.keep_alive(lease_id, timeout)
        except KeepAliveFailed as exc:
            left = timeout - (time.monotonic() - started)
            if left <= 0:
                raise
            ttl = self._grpc_keep_alive(lease_id, left)
            log.warning("etcd's JSON gateway does not answer keep-alives (%s); they go over gRPC", exc)
            self.over_grpc = True
            return ttl

    def close(self) -> None:
        self._http.close()
        if self._grpc is not None:
            self._grpc.close()

    def _grpc_keep_alive(self, lease_id: int, timeout: float) -> int:
        if self._grpc is None:
            self._grpc = GrpcKeepAlive(self._endpoints, self._tls)
        return self._grpc.keep_alive(lease_id, timeout)


def _granted_ttl(status: int, body: bytes) -> int:
    """The TTL in the gateway's answer: ``{"result": {"ID": ..., "TTL": "2"}}``; a lease that is
    gone is answered without a TTL (protobuf's JSON leaves zero out)."""
    if status != 200:
        raise KeepAliveFailed(f"etcd answered a keep-alive with HTTP {status}: {body[:200]!r}")
    try:
        answer = json.loads(body)
        return int(answer["result"].get("TTL", 0))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise KeepAliveFailed(f"etcd's answer to a keep-alive is not one: {body[:200]!r}") from exc


def _tls_context(tls: EtcdTLS) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=tls.ca_file or None)
    if tls.cert_file:
        context.load_cert_chain(tls.cert_file, tls.key_file)
    return context
