"""TLS for schedd's own connections to etcd and PostgreSQL, against real servers.

etcd: a member started with TLS and client-certificate auth answers an ``https://`` client that
verifies it and presents a certificate, from explicit files or from ``SCHEDD_ETCD_*``; a client
without a certificate, one that does not trust the CA, and a plaintext client get nothing.

PostgreSQL: schedd's engines honour libpq's ``PGSSLMODE``/``PGSSLROOTCERT`` (asyncpg reads them):
``verify-full`` against a server whose certificate the CA signed connects over TLS, and a CA that did
not sign it is refused.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from schedd_coord.client import EtcdClient, EtcdTLS
from schedd_coord.errors import CoordinationError
from schedd_coord.keepalives import KeepAlives
from schedd_coord.lease import KeptLease, LeaseTiming
from schedd_devstack import LocalPostgres
from schedd_devstack.binaries import find_etcd
from schedd_devstack.ports import free_port
from schedd_store.engine import make_engine
from tests.fixtures.certs import Certificates, make_certificates

pytestmark = pytest.mark.integration

STARTUP_SECONDS = 30.0


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def tls_etcd(certs: Certificates, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An etcd member serving TLS on its client port and requiring client certificates."""
    base = tmp_path_factory.mktemp("tls-etcd")
    client, peer = free_port(), free_port()
    url = f"https://127.0.0.1:{client}"
    proc = subprocess.Popen(
        [
            str(find_etcd()),
            "--name=tls",
            f"--data-dir={base / 'data'}",
            f"--listen-client-urls={url}",
            f"--advertise-client-urls={url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
            f"--initial-cluster=tls=http://127.0.0.1:{peer}",
            f"--cert-file={certs.server_cert}",
            f"--key-file={certs.server_key}",
            "--client-cert-auth",
            f"--trusted-ca-file={certs.ca}",
        ],
        stdout=(base / "etcd.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        trusted = EtcdTLS(str(certs.ca), str(certs.client_cert), str(certs.client_key))
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                asyncio.run(_ping(url, trusted))
                break
            except CoordinationError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def _ping(endpoints: str, tls: EtcdTLS | None = None, timeout: float = 2.0) -> int:
    client = EtcdClient(endpoints, tls=tls, timeout=timeout)
    try:
        return await client.ping()
    finally:
        await client.close()


async def test_etcd_over_mutual_tls(tls_etcd: str, certs: Certificates) -> None:
    client = EtcdClient(tls_etcd, tls=EtcdTLS(str(certs.ca), str(certs.client_cert), str(certs.client_key)))
    try:
        await client.put(b"/schedd/test/tls", b"yes")
        found = await client.get(b"/schedd/test/tls")
        assert found is not None and found.value == b"yes"
        lease = await client.grant(5)
        await client.revoke(lease)
    finally:
        await client.close()


async def test_etcd_tls_files_from_the_environment(
    tls_etcd: str, certs: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SCHEDD_ETCD_CA_FILE", str(certs.ca))
    monkeypatch.setenv("SCHEDD_ETCD_CERT_FILE", str(certs.client_cert))
    monkeypatch.setenv("SCHEDD_ETCD_KEY_FILE", str(certs.client_key))
    assert await _ping(tls_etcd) > 0


@pytest.mark.parametrize("who", ["no client certificate", "a CA that did not sign etcd", "plaintext"])
async def test_etcd_refuses_what_tls_does_not_allow(tls_etcd: str, certs: Certificates, who: str) -> None:
    endpoints, tls = {
        "no client certificate": (tls_etcd, EtcdTLS(str(certs.ca))),
        "a CA that did not sign etcd": (
            tls_etcd,
            EtcdTLS(str(certs.stranger_cert), str(certs.client_cert), str(certs.client_key)),
        ),
        "plaintext": (tls_etcd.replace("https://", "http://"), None),
    }[who]
    with pytest.raises(CoordinationError):
        await _ping(endpoints, tls, timeout=1.0)


def test_half_an_etcd_client_certificate_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SCHEDD_ETCD_CERT_FILE", "client.pem")
    monkeypatch.delenv("SCHEDD_ETCD_KEY_FILE", raising=False)
    with pytest.raises(ValueError, match="SCHEDD_ETCD_KEY_FILE"):
        EtcdClient("https://127.0.0.1:2379")


@pytest.fixture
def tls_postgres(certs: Certificates, private_postgres: LocalPostgres) -> LocalPostgres:
    """The private PostgreSQL with TLS turned on (a reload applies the ssl settings)."""
    data = private_postgres.data_dir
    owner = data.stat()
    for name, source in (("server.crt", certs.server_cert), ("server.key", certs.server_key)):
        target = data / name
        shutil.copyfile(source, target)
        os.chmod(target, 0o600)
        if os.geteuid() == 0:
            os.chown(target, owner.st_uid, owner.st_gid)
    with (data / "postgresql.conf").open("a") as conf:
        conf.write("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n")

    async def reload() -> None:
        engine = make_engine(private_postgres.url)
        try:
            async with engine.connect() as conn:
                await conn.execute("SELECT pg_reload_conf()")
        finally:
            await engine.dispose()

    asyncio.run(reload())
    return private_postgres


async def _uses_tls(url: str) -> bool:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            result = await conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            return bool(result.scalar_one())
    finally:
        await engine.dispose()


async def test_postgres_verify_full_through_libpq_variables(
    tls_postgres: LocalPostgres, certs: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    monkeypatch.setenv("PGSSLROOTCERT", str(certs.ca))
    url = tls_postgres.url
    deadline = time.monotonic() + STARTUP_SECONDS  # the reload is applied asynchronously
    while True:
        try:
            assert await _uses_tls(url)
            break
        except OSError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    monkeypatch.setenv("PGSSLROOTCERT", str(certs.stranger_cert))
    with pytest.raises(OSError):
        await _uses_tls(url)


async def test_a_lease_is_kept_alive_over_mutual_tls(
    tls_etcd: str, certs: Certificates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease thread's keep-alives go over HTTPS with the same files as the gRPC client: the
    lease outlives its TTL only if they are answered."""
    monkeypatch.setenv("SCHEDD_ETCD_CA_FILE", str(certs.ca))
    monkeypatch.setenv("SCHEDD_ETCD_CERT_FILE", str(certs.client_cert))
    monkeypatch.setenv("SCHEDD_ETCD_KEY_FILE", str(certs.client_key))
    timing = LeaseTiming(ttl=2, renew_deadline=1.4, retry_period=0.3)
    lease = KeptLease(tls_etcd, timing)
    await lease.start()
    try:
        await asyncio.sleep(timing.ttl * 1.5)
        assert lease.valid, "no keep-alive over TLS was acknowledged"
    finally:
        await lease.stop(revoke=True)


async def test_keep_alives_go_over_grpc_where_the_gateway_cannot_answer(
    tls_etcd: str, certs: Certificates
) -> None:
    """This member requires client certificates and its own certificate is for servers only, so its
    JSON gateway cannot reach it (the gateway presents that certificate): keep-alives that fail over
    HTTP are answered over gRPC and go that way from then on."""
    tls = EtcdTLS(str(certs.ca), str(certs.client_cert), str(certs.client_key))
    client = EtcdClient(tls_etcd, tls=tls)
    keeper = KeepAlives(tls_etcd, tls)
    try:
        lease_id = await client.grant(7)
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) == 7
        assert keeper.over_grpc
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) == 7
        await client.revoke(lease_id)
        assert await asyncio.to_thread(keeper.keep_alive, lease_id, 2.0) <= 0
    finally:
        keeper.close()
        await client.close()
