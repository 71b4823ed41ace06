"""TLS and mutual TLS on a real api process: schedctl connects over TLS with the CA, and with its
client certificate under mutual TLS; a plaintext client, a client without a certificate and a
client with a certificate from another CA are refused; a half TLS configuration stops the api at
start-up naming the variable."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from schedd_devstack.ports import free_port
from schedd_devstack.services import ServiceProcess
from schedd_store.migrate import upgrade
from tests.fixtures.certs import Certificates, make_certificates
from tests.fixtures.services import schedctl

pytestmark = pytest.mark.e2e

EXIT_UNAVAILABLE = 5


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@contextmanager
def tls_api(fresh: str, log_dir: Path, env: dict[str, str]) -> Iterator[str]:
    upgrade(fresh)
    address = f"127.0.0.1:{free_port()}"
    proc = ServiceProcess(
        "api",
        [sys.executable, "-m", "schedd_api.main"],
        env={k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")}
        | env
        | {"SCHEDD_DATABASE_URL": fresh, "SCHEDD_API_LISTEN": address, "SCHEDD_AUTH": "none"},
        log_dir=log_dir,
    )
    proc.start()
    try:
        wait_listening(proc, address)
        yield address
    finally:
        proc.terminate()


def wait_listening(proc: ServiceProcess, address: str, timeout: float = 60.0) -> None:
    """Until ``address`` accepts TCP connections (the api has started), bounded."""
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.alive, proc.describe_failure("the api exited")
        with contextlib.suppress(OSError), socket.create_connection((host, int(port)), timeout=1):
            return
        time.sleep(0.05)
    raise AssertionError(f"the api did not listen on {address} within {timeout:g}s")


def dags_list(address: str, *tls: str) -> subprocess.CompletedProcess[str]:
    """``schedctl dags list`` with a deadline that outlasts the api's start-up."""
    return schedctl(address, "--timeout", "20", *tls, "dags", "list")


def test_tls_with_the_ca_works_and_plaintext_is_refused(
    fresh_database_url: str, certs: Certificates, tmp_path: Path
) -> None:
    env = {"SCHEDD_TLS_CERT_FILE": str(certs.server_cert), "SCHEDD_TLS_KEY_FILE": str(certs.server_key)}
    with tls_api(fresh_database_url, tmp_path, env) as address:
        ok = dags_list(address, "--tls-ca", str(certs.ca))
        assert ok.returncode == 0, ok.stderr
        assert "no DAGs" in ok.stdout or ok.stdout.strip() == "" or "DAG" in ok.stdout
        plain = schedctl(address, "--timeout", "3", "dags", "list")
        assert plain.returncode == EXIT_UNAVAILABLE, plain.stderr


def test_mutual_tls_refuses_clients_without_a_trusted_certificate(
    fresh_database_url: str, certs: Certificates, tmp_path: Path
) -> None:
    env = {
        "SCHEDD_TLS_CERT_FILE": str(certs.server_cert),
        "SCHEDD_TLS_KEY_FILE": str(certs.server_key),
        "SCHEDD_TLS_CLIENT_CA_FILE": str(certs.ca),
    }
    with tls_api(fresh_database_url, tmp_path, env) as address:
        ca = ("--tls-ca", str(certs.ca))
        ok = dags_list(address, *ca, "--tls-cert", str(certs.client_cert), "--tls-key", str(certs.client_key))
        assert ok.returncode == 0, ok.stderr
        anonymous = schedctl(address, "--timeout", "3", *ca, "dags", "list")
        assert anonymous.returncode == EXIT_UNAVAILABLE, anonymous.stderr
        stranger = schedctl(
            address,
            "--timeout",
            "3",
            *ca,
            "--tls-cert",
            str(certs.stranger_cert),
            "--tls-key",
            str(certs.stranger_key),
            "dags",
            "list",
        )
        assert stranger.returncode == EXIT_UNAVAILABLE, stranger.stderr


def test_a_half_tls_configuration_stops_the_api_naming_the_variable(
    database_url: str, certs: Certificates
) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "schedd_api.main"],
        env={
            **os.environ,
            "SCHEDD_DATABASE_URL": database_url,
            "SCHEDD_API_LISTEN": f"127.0.0.1:{free_port()}",
            "SCHEDD_TLS_CERT_FILE": str(certs.server_cert),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2, result.stderr
    assert "SCHEDD_TLS_KEY_FILE" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_client_certificate_without_its_key_is_a_usage_error(certs: Certificates) -> None:
    result = schedctl(f"127.0.0.1:{free_port()}", "--tls-cert", str(certs.client_cert), "dags", "list")
    assert result.returncode == 2
    assert "--tls-key" in result.stderr
