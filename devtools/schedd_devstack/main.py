"""``schedd-devstack``: run a local PostgreSQL and etcd in the foreground.

``schedd-devstack up`` starts both, prints ``export SCHEDD_DATABASE_URL=...``
and ``export SCHEDD_ETCD_ENDPOINTS=...`` on stdout (progress goes to stderr),
and then waits until SIGINT or SIGTERM, whereupon it stops both and exits 0.
If either server dies on its own, it stops the other and exits 1.

``--env-file PATH`` additionally writes the two export lines to PATH once both
servers are ready. The file appears atomically (written aside, then renamed),
so a script may poll for its existence and then source it. A stale file is
removed before start-up, and the file is removed again on shutdown.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from schedd_devstack.binaries import DevstackError
from schedd_devstack.stack import DevStack

app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Local PostgreSQL and etcd for schedd development."
)

_POLL_SECONDS = 0.5


class _StopRequested(Exception):
    """Raised by our signal handler to unwind start-up or the wait."""


def _export_lines(env: dict[str, str]) -> str:
    return "".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items())


def _write_atomically(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


@app.callback()
def _root() -> None:
    """Local PostgreSQL and etcd for schedd development."""


@app.command()
def up(
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Keep data and logs here (reused on the next run). "
            "Default: a temporary directory, deleted on exit.",
        ),
    ] = None,
    fast: Annotated[
        bool,
        typer.Option("--fast", help="Turn off fsync in both servers: faster, but not crash-safe."),
    ] = False,
    env_file: Annotated[
        Path | None,
        typer.Option("--env-file", help="Write the export lines here once both servers are ready."),
    ] = None,
) -> None:
    """Start PostgreSQL and etcd, print their environment, and run until SIGINT/SIGTERM."""
    stop_requested = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop_requested.is_set():
            return  # already shutting down: let the bounded stop finish
        stop_requested.set()
        raise _StopRequested(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    if env_file is not None:
        env_file.unlink(missing_ok=True)
    stack = DevStack(directory, durable=not fast)
    exit_code = 0
    try:
        typer.echo("starting PostgreSQL and etcd ...", err=True)
        stack.start()
        lines = _export_lines(stack.env())
        if env_file is not None:
            _write_atomically(env_file, lines)
        typer.echo(lines, nl=False)
        sys.stdout.flush()
        typer.echo(
            f"ready (data and logs in {stack.base_dir}, postgres pid {stack.postgres.pid}, "
            f"etcd pid {stack.etcd.pid}); Ctrl-C to stop",
            err=True,
        )
        while not stop_requested.wait(_POLL_SECONDS):
            dead = stack.dead()
            if dead:
                typer.echo(f"{' and '.join(dead)} exited unexpectedly; stopping", err=True)
                exit_code = 1
                break
    except _StopRequested as exc:
        typer.echo(f"received {exc}; stopping", err=True)
    except DevstackError as exc:
        typer.echo(f"error: {exc}", err=True)
        exit_code = 1
    finally:
        stop_requested.set()  # from here on, further signals are ignored
        try:
            stack.stop()
        finally:
            if env_file is not None:
                with contextlib.suppress(OSError):
                    env_file.unlink(missing_ok=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    typer.echo("stopped", err=True)
    raise typer.Exit(exit_code)


def main() -> None:
    """Console-script entry point (``schedd-devstack``)."""
    app()


if __name__ == "__main__":
    main()
