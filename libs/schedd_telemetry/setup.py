"""What a service's entry point calls first: logging in the configured format, then tracing."""

from __future__ import annotations

import typer

from schedd_telemetry import tracing
from schedd_telemetry.logs import configure_logging


def setup_telemetry(service: str, log_level: str) -> bool:
    """Configure logging (``SCHEDD_LOG_FORMAT``) at ``log_level`` and tracing (``OTEL_*``) for
    ``service``; returns whether tracing is on. A bad setting exits with status 2 and says which."""
    try:
        configure_logging(log_level)
        return tracing.configure(service)
    except ValueError as exc:
        typer.echo(f"{service}: {exc}", err=True)
        raise typer.Exit(2) from None
