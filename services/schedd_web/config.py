"""Configuration of the web service, read once in ``main``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from schedd_core.errors import InvalidArgument
from schedd_rpc.tls import ClientTLS

#: A session unused this long is forgotten (``SCHEDD_WEB_SESSION_IDLE``, seconds).
DEFAULT_IDLE_SECONDS = 30 * 60
#: A session ends this long after sign-in, used or not (``SCHEDD_WEB_SESSION_MAX_AGE``, seconds).
DEFAULT_MAX_AGE_SECONDS = 12 * 3600


@dataclass(frozen=True)
class WebConfig:
    #: host:port the UI is served on
    listen: str = "127.0.0.1:8080"
    #: host:port of the api
    api: str = "127.0.0.1:50051"
    #: TLS to the api (``SCHEDD_API_TLS_CA_FILE``; ``_CERT_FILE``/``_KEY_FILE`` for mutual TLS);
    #: None: plaintext
    api_tls: ClientTLS | None = None
    #: the UI's own certificate and key (``SCHEDD_WEB_TLS_CERT_FILE``/``_KEY_FILE``); empty: plain HTTP
    tls_cert_file: str = ""
    tls_key_file: str = ""
    #: mark the session cookie Secure although this process serves plain HTTP (a TLS proxy in front)
    secure_cookies: bool = False
    idle_seconds: float = DEFAULT_IDLE_SECONDS
    max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS
    #: host:port to serve Prometheus metrics on (``/metrics``); empty for none
    metrics_listen: str = ""

    @property
    def tls(self) -> bool:
        return bool(self.tls_cert_file)

    @property
    def cookie_secure(self) -> bool:
        return self.tls or self.secure_cookies

    @staticmethod
    def from_env(env: Mapping[str, str], *, listen: str, api: str, metrics_listen: str) -> WebConfig:
        """The settings from ``env`` and the command line; InvalidArgument naming the variable when one
        is malformed or half of a pair is missing."""
        cert, key = env.get("SCHEDD_WEB_TLS_CERT_FILE", ""), env.get("SCHEDD_WEB_TLS_KEY_FILE", "")
        if bool(cert) != bool(key):
            missing = "SCHEDD_WEB_TLS_KEY_FILE" if cert else "SCHEDD_WEB_TLS_CERT_FILE"
            raise InvalidArgument(missing, "is needed with the other TLS file")
        api_tls = ClientTLS.from_values(
            env.get("SCHEDD_API_TLS_CA_FILE", ""),
            env.get("SCHEDD_API_TLS_CERT_FILE", ""),
            env.get("SCHEDD_API_TLS_KEY_FILE", ""),
            prefix="SCHEDD_API_TLS_",
        )
        secure = env.get("SCHEDD_WEB_SECURE_COOKIES", "false").lower()
        if secure not in ("true", "false", "1", "0"):
            raise InvalidArgument("SCHEDD_WEB_SECURE_COOKIES", "must be true or false")
        return WebConfig(
            listen=listen,
            api=api,
            api_tls=api_tls,
            tls_cert_file=cert,
            tls_key_file=key,
            secure_cookies=secure in ("true", "1"),
            idle_seconds=_seconds(env, "SCHEDD_WEB_SESSION_IDLE", DEFAULT_IDLE_SECONDS),
            max_age_seconds=_seconds(env, "SCHEDD_WEB_SESSION_MAX_AGE", DEFAULT_MAX_AGE_SECONDS),
            metrics_listen=metrics_listen,
        )


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "")
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise InvalidArgument(name, f"must be a number of seconds, not {raw!r}") from None
    if value <= 0:
        raise InvalidArgument(name, "must be positive")
    return value
