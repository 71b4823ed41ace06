"""Entry point of the web UI: ``schedd-web``."""

from __future__ import annotations

import logging
import os
import ssl

import typer
import uvloop
from aiohttp import web

from schedd_core.errors import InvalidArgument
from schedd_rpc.server import stop_signals
from schedd_telemetry.exposition import bind_address
from schedd_telemetry.setup import setup_telemetry
from schedd_web.app import make_app
from schedd_web.config import WebConfig
from schedd_web.metrics import WebMetrics

log = logging.getLogger("schedd.web")


def _ssl_context(config: WebConfig) -> ssl.SSLContext | None:
    if not config.tls:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    try:
        context.load_cert_chain(config.tls_cert_file, config.tls_key_file)
    except (OSError, ssl.SSLError) as exc:
        raise InvalidArgument(
            "SCHEDD_WEB_TLS_CERT_FILE", f"cannot load the certificate and key: {exc}"
        ) from None
    return context


async def serve(config: WebConfig) -> None:
    metrics = WebMetrics()
    app = make_app(config, metrics)
    host, port = bind_address(config.listen)
    context = _ssl_context(config)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=5)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=context)
    try:
        await site.start()
    except OSError as exc:
        await runner.cleanup()
        raise InvalidArgument(
            "SCHEDD_WEB_LISTEN", f"cannot listen on {config.listen}: {exc.strerror}"
        ) from None
    if config.metrics_listen:
        metrics.serve(config.metrics_listen)
    stop = stop_signals()
    scheme = "https" if context else "http"
    log.info("web UI on %s://%s:%d/ (api %s)", scheme, host, port, config.api)
    await stop.wait()
    await runner.cleanup()


def cli(
    listen: str = typer.Option(
        "127.0.0.1:8080", envvar="SCHEDD_WEB_LISTEN", help="[host:]port to serve the UI on"
    ),
    api: str = typer.Option("127.0.0.1:50051", envvar="SCHEDD_API", help="host:port of the api"),
    metrics_listen: str = typer.Option("", envvar="SCHEDD_METRICS_LISTEN", help="[host:]port (loopback)"),
    log_level: str = typer.Option("INFO", envvar="SCHEDD_LOG_LEVEL"),
) -> None:
    """Serve the web UI. It holds no credential of its own: users sign in with their api tokens.

    TLS for the UI: ``SCHEDD_WEB_TLS_CERT_FILE`` and ``SCHEDD_WEB_TLS_KEY_FILE`` (or a TLS proxy in
    front and ``SCHEDD_WEB_SECURE_COOKIES=true``); TLS to the api: ``SCHEDD_API_TLS_CA_FILE`` and, for
    mutual TLS, ``SCHEDD_API_TLS_CERT_FILE``/``_KEY_FILE``. Sessions: ``SCHEDD_WEB_SESSION_IDLE`` and
    ``SCHEDD_WEB_SESSION_MAX_AGE`` (seconds). See docs/ui.md.
    """
    setup_telemetry("schedd-web", log_level)
    try:
        config = WebConfig.from_env(os.environ, listen=listen, api=api, metrics_listen=metrics_listen)
        uvloop.run(serve(config))
    except (InvalidArgument, ValueError) as exc:
        typer.echo(f"schedd-web: {exc}", err=True)
        raise typer.Exit(2) from None


def main() -> None:
    typer.run(cli)


if __name__ == "__main__":
    main()
