"""``schedd-probe``: a health check for container runtimes that have no gRPC probe of their own.

``schedd-probe grpc HOST:PORT`` asks the server's standard gRPC health service (``grpc.health.v1``,
public on every schedd server, no token needed) and exits 0 when it answers SERVING, over TLS when
``--tls-ca`` is given (and presenting ``--tls-cert``/``--tls-key`` under mutual TLS).
``schedd-probe http HOST:PORT`` fetches ``/metrics`` and exits 0 on HTTP 200: the services without
a gRPC server (scheduler, worker) serve that endpoint once they have started.

Exit status: 0 healthy; 1 unhealthy or unreachable within ``--timeout`` (the reason on stderr);
2 usage. Guaranteed: a probe never waits longer than ``--timeout`` seconds for its answer. Not
guaranteed: that a SERVING server can reach PostgreSQL or etcd (health says the server is up and
has not begun to stop).
"""

from __future__ import annotations

import http.client

import grpc
import typer
from grpc_health.v1 import health_pb2, health_pb2_grpc

from schedd_core.errors import InvalidArgument
from schedd_rpc.tls import ClientTLS

app = typer.Typer(add_completion=False, help="Health checks of schedd's servers, for container runtimes.")


def _unhealthy(reason: str) -> typer.Exit:
    typer.echo(f"schedd-probe: {reason}", err=True)
    return typer.Exit(1)


def check_grpc(address: str, service: str, timeout: float, tls: ClientTLS | None, server_name: str) -> str:
    """The serving status of ``service`` at ``address`` (``SERVING``, ``NOT_SERVING``...).

    Raises grpc.RpcError when the server cannot be reached or answers with an error."""
    options = [("grpc.ssl_target_name_override", server_name)] if tls and server_name else []
    channel = (
        grpc.secure_channel(address, tls.credentials(), options=options)
        if tls
        else grpc.insecure_channel(address)
    )
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        response = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout)
    return str(health_pb2.HealthCheckResponse.ServingStatus.Name(response.status))


def check_http(address: str, path: str, timeout: float) -> int:
    """The HTTP status of ``GET path`` at ``address``; OSError when it cannot be reached."""
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host or "127.0.0.1", int(port), timeout=timeout)
    try:
        connection.request("GET", path)
        return connection.getresponse().status
    finally:
        connection.close()


@app.command("grpc")
def grpc_probe(
    address: str = typer.Argument(..., help="host:port of the server"),
    service: str = typer.Option("", help="the service to ask about; empty: the server as a whole"),
    timeout: float = typer.Option(3.0, min=0.1, help="seconds to wait for the answer"),
    tls_ca: str = typer.Option("", help="CA that signed the server's certificate: connect with TLS"),
    tls_cert: str = typer.Option("", help="this client's certificate (mutual TLS)"),
    tls_key: str = typer.Option("", help="its key"),
    server_name: str = typer.Option("", help="the name to verify the server's certificate against"),
) -> None:
    """Exit 0 when the server's gRPC health service answers SERVING."""
    if bool(tls_cert) != bool(tls_key):
        raise typer.BadParameter("--tls-cert and --tls-key are given together or not at all")
    try:
        tls = ClientTLS.from_values(tls_ca, tls_cert, tls_key, prefix="--tls-")
        status = check_grpc(address, service, timeout, tls, server_name)
    except InvalidArgument as exc:
        raise typer.BadParameter(str(exc)) from None
    except grpc.RpcError as exc:
        raise _unhealthy(f"{address}: {exc.code().name}: {exc.details()}") from None
    if status != "SERVING":
        raise _unhealthy(f"{address}: {status}")


@app.command("http")
def http_probe(
    address: str = typer.Argument(..., help="host:port of the metrics endpoint"),
    path: str = typer.Option("/metrics", help="the path to fetch"),
    timeout: float = typer.Option(3.0, min=0.1, help="seconds to wait for the answer"),
) -> None:
    """Exit 0 when ``GET path`` answers HTTP 200."""
    try:
        status = check_http(address, path, timeout)
    except (OSError, ValueError) as exc:
        raise _unhealthy(f"{address}: {exc}") from None
    if status != 200:
        raise _unhealthy(f"{address}{path}: HTTP {status}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
