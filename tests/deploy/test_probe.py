"""``schedd-probe`` (the health check of the compose file) against real servers, over TLS and
mutual TLS with the certificates ``deploy/make-secrets.sh`` makes: it exits 0 only for a server
that answers SERVING on a verified connection, and 1 for one that is not serving, unreachable,
or not the server the certificate names. The script's bootstrap token is a valid schedd token."""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import shutil
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from schedd_auth.tokens import parse
from schedd_devstack.ports import free_port
from schedd_rpc.server import make_server, set_serving
from schedd_rpc.tls import ServerTLS
from tests.deploy.sources import DEPLOY

MAKE_SECRETS = DEPLOY / "make-secrets.sh"


@pytest.fixture(scope="module")
def secrets(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed: deploy/make-secrets.sh needs it")
    directory = tmp_path_factory.mktemp("deploy") / "secrets"
    subprocess.run(["sh", str(MAKE_SECRETS), str(directory)], check=True, capture_output=True, timeout=120)
    return directory


def _digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.parent.rglob("*"))
        if p.is_file()
    }


def test_the_secrets_are_a_valid_token_and_are_kept_when_made_again(secrets: Path) -> None:
    token = (secrets / "bootstrap-token").read_text().strip()
    assert parse(token) is not None, token
    env = dict(
        line.split("=", 1) for line in (secrets.parent / ".env").read_text().splitlines() if "=" in line
    )
    assert env["SCHEDD_BOOTSTRAP_TOKEN"] == token
    assert env["POSTGRES_PASSWORD"] == (secrets / "postgres-password").read_text().strip()
    before = _digests(secrets)
    subprocess.run(["sh", str(MAKE_SECRETS), str(secrets)], check=True, capture_output=True, timeout=120)
    assert _digests(secrets) == before


async def probe(*args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "schedd_rpc.probe",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, err.decode()


class Server:
    def __init__(self, address: str, server: grpc.aio.Server, health: Any) -> None:
        self.address, self.server, self.health = address, server, health

    async def serving(self, serving: bool) -> None:
        await set_serving(self.health, [], serving)


async def _start(tls: ServerTLS) -> Server:
    address = f"127.0.0.1:{free_port()}"
    server, health = make_server(address, [], lambda _: None, tls=tls)
    await server.start()
    started = Server(address, server, health)
    await started.serving(True)
    return started


@pytest.fixture
async def tls_server(secrets: Path) -> AsyncIterator[Server]:
    tls = secrets / "tls"
    server = await _start(ServerTLS(str(tls / "server.crt"), str(tls / "server.key")))
    yield server
    await server.server.stop(0)


@pytest.fixture
async def mutual_tls_server(secrets: Path) -> AsyncIterator[Server]:
    tls = secrets / "tls"
    server = await _start(ServerTLS(str(tls / "server.crt"), str(tls / "server.key"), str(tls / "ca.crt")))
    yield server
    await server.server.stop(0)


async def test_a_serving_tls_server_is_healthy_only_when_verified(tls_server: Server, secrets: Path) -> None:
    ca = f"--tls-ca={secrets / 'tls' / 'ca.crt'}"
    assert await probe("grpc", tls_server.address, ca, "--server-name=api") == (0, "")
    assert await probe("grpc", tls_server.address, ca, "--server-name=registry") == (0, "")
    code, err = await probe("grpc", tls_server.address, ca, "--server-name=etcd", "--timeout=2")
    assert code == 1 and "UNAVAILABLE" in err
    code, err = await probe("grpc", tls_server.address, "--timeout=2")  # plaintext to a TLS port
    assert code == 1 and "UNAVAILABLE" in err


async def test_a_server_that_stopped_serving_is_unhealthy(tls_server: Server, secrets: Path) -> None:
    ca = f"--tls-ca={secrets / 'tls' / 'ca.crt'}"
    await tls_server.serving(False)
    code, err = await probe("grpc", tls_server.address, ca, "--server-name=api")
    assert code == 1 and "NOT_SERVING" in err


async def test_mutual_tls_needs_the_client_certificate(mutual_tls_server: Server, secrets: Path) -> None:
    tls = secrets / "tls"
    ca = f"--tls-ca={tls / 'ca.crt'}"
    client = (f"--tls-cert={tls / 'client.crt'}", f"--tls-key={tls / 'client.key'}")
    assert await probe("grpc", mutual_tls_server.address, ca, *client, "--server-name=api") == (0, "")
    code, _ = await probe("grpc", mutual_tls_server.address, ca, "--server-name=api", "--timeout=2")
    assert code == 1
    code, err = await probe("grpc", mutual_tls_server.address, ca, client[0])  # a certificate without its key
    assert code == 2 and "--tls-key" in err


async def test_an_unreachable_server_is_unhealthy() -> None:
    code, err = await probe("grpc", f"127.0.0.1:{free_port()}", "--timeout=2")
    assert code == 1 and "UNAVAILABLE" in err


class _Metrics(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(b"schedd_worker_slots 1\n")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def metrics_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    thread.join(10)


async def test_the_http_probe_wants_200_from_the_metrics_path(metrics_endpoint: str) -> None:
    assert await probe("http", metrics_endpoint) == (0, "")
    code, err = await probe("http", metrics_endpoint, "--path=/healthz")
    assert code == 1 and "HTTP 404" in err
    code, _ = await probe("http", f"127.0.0.1:{free_port()}")
    assert code == 1
