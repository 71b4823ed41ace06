"""TLS and mutual TLS for schedd's gRPC servers and clients, configured by files.

A server serves TLS when it is given a certificate and key (``SCHEDD_TLS_CERT_FILE``,
``SCHEDD_TLS_KEY_FILE``); with a client CA (``SCHEDD_TLS_CLIENT_CA_FILE``) it also requires every
client to present a certificate that CA signed (mutual TLS) and refuses the handshake otherwise.
A client (a worker, schedctl) verifies the server against ``SCHEDD_TLS_CA_FILE`` (or the system's
roots when only TLS is asked for) and presents its own certificate and key for mutual TLS.

Clients send their bearer token as call metadata (:func:`token_metadata`). A half configuration
(a certificate without its key, a file that cannot be read) is refused at start-up with the
variable's name, never served as plaintext.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import grpc

from schedd_core.errors import InvalidArgument


def _read(variable: str, path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidArgument(variable, f"cannot read {path!r}: {exc.strerror or exc}") from None


@dataclass(frozen=True)
class ServerTLS:
    cert_file: str
    key_file: str
    client_ca_file: str = ""

    def credentials(self) -> grpc.ServerCredentials:
        key = _read("SCHEDD_TLS_KEY_FILE", self.key_file)
        cert = _read("SCHEDD_TLS_CERT_FILE", self.cert_file)
        ca = _read("SCHEDD_TLS_CLIENT_CA_FILE", self.client_ca_file) if self.client_ca_file else None
        return grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=ca, require_client_auth=ca is not None
        )

    @staticmethod
    def from_env(env: Mapping[str, str]) -> ServerTLS | None:
        """The server's TLS settings, None for plaintext; InvalidArgument for half of them."""
        cert, key = env.get("SCHEDD_TLS_CERT_FILE", ""), env.get("SCHEDD_TLS_KEY_FILE", "")
        client_ca = env.get("SCHEDD_TLS_CLIENT_CA_FILE", "")
        if not cert and not key:
            if client_ca:
                raise InvalidArgument(
                    "SCHEDD_TLS_CLIENT_CA_FILE", "needs SCHEDD_TLS_CERT_FILE and SCHEDD_TLS_KEY_FILE"
                )
            return None
        if not cert or not key:
            missing = "SCHEDD_TLS_KEY_FILE" if cert else "SCHEDD_TLS_CERT_FILE"
            raise InvalidArgument(missing, "is needed with the other TLS file")
        return ServerTLS(cert, key, client_ca)


@dataclass(frozen=True)
class ClientTLS:
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""

    def credentials(self) -> grpc.ChannelCredentials:
        ca = _read("ca", self.ca_file) if self.ca_file else None
        key = _read("key", self.key_file) if self.key_file else None
        cert = _read("cert", self.cert_file) if self.cert_file else None
        return grpc.ssl_channel_credentials(root_certificates=ca, private_key=key, certificate_chain=cert)

    @staticmethod
    def from_values(ca_file: str, cert_file: str, key_file: str, *, prefix: str) -> ClientTLS | None:
        """None for plaintext (no file given); InvalidArgument (naming ``prefix`` + the setting) for a
        certificate without its key."""
        if bool(cert_file) != bool(key_file):
            raise InvalidArgument(
                prefix + ("KEY" if cert_file else "CERT"), "is needed with the other client file"
            )
        if not (ca_file or cert_file):
            return None
        return ClientTLS(ca_file, cert_file, key_file)


def token_metadata(token: str) -> tuple[tuple[str, str], ...]:
    """The metadata that carries ``token``, passed with each call (on plaintext and TLS channels)."""
    return (("authorization", f"Bearer {token}"),) if token else ()
