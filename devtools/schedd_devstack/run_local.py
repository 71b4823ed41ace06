"""``make run``: a whole schedd on this machine, with the examples registered and one run done.

``python -m schedd_devstack.run_local`` starts PostgreSQL and etcd with their data in
``.schedd/`` under the current directory (kept, so DAGs and runs survive a restart),
migrates the database, starts the api, the registry, one scheduler, two workers and the web UI
(logs in ``.schedd/logs/``), registers every ``examples/*.yaml`` and ``examples/*.py`` with ``schedctl``
(``examples/`` as their code bundle),
triggers ``diamond`` and waits for it, and then prints how to use ``schedctl`` against
the running stack and where each service serves its Prometheus ``/metrics``.
Authentication is on: an admin token is written to ``.schedd/admin-token`` and workers
connect with a worker token. It keeps running until Ctrl-C or SIGTERM and then stops everything
it started. Exit status: 0 after a requested stop, 1 when a step fails or a service
dies (the message says which, with its log tail).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from schedd_auth.secret_box import KEYS_FILE_ENV, new_key
from schedd_coord.access import ROOT_USER
from schedd_devstack.binaries import DevstackError
from schedd_devstack.credentials import write_secret
from schedd_devstack.ports import port_is_free
from schedd_devstack.services import Cluster, ServiceProcess
from schedd_devstack.stack import DevStack

DEFAULT_DIR = Path(".schedd")
DEFAULT_API_PORT = 50051  # schedctl's default address; used when free
DEFAULT_WEB_PORT = 8080  # the web UI's default address; used when free
SCHEDCTL_TIMEOUT = 60.0
RUN_WAIT_TIMEOUT = 120.0
_POLL_SECONDS = 0.5

console = Console(highlight=False)


class _StopRequested(Exception):
    """Raised by the signal handler to unwind whatever step is running."""


class StepFailed(Exception):
    """A step of the start-up failed; the message says which and why."""


def _examples_dir() -> Path:
    """``./examples`` when run from a checkout (``make run``), else the one next to this package."""
    here = Path("examples")
    if here.is_dir():
        return here
    return Path(__file__).resolve().parents[2] / "examples"


def _schedctl(
    api: str, *args: str, capture: bool = True, timeout: float = SCHEDCTL_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "schedctl.main", "--api", api, *args],
        capture_output=capture,
        text=True,
        timeout=timeout,
        check=False,
    )


def _step(message: str) -> None:
    console.print(f"[bold cyan]==>[/bold cyan] {message}")


def _ok(message: str) -> None:
    console.print(f"    [green]ok[/green] {message}")


#: Pools the example DAGs need, created before they are registered.
EXAMPLE_POOLS = {"warehouse": 2}


def register_examples(api: str, examples: Path) -> list[str]:
    """Create the pools the examples use, then register every example with ``examples`` as its bundle."""
    files = sorted(examples.glob("*.yaml")) + sorted(
        p for p in examples.glob("*.py") if p.name != "__init__.py"
    )
    if not files:
        raise StepFailed(f"no examples/*.yaml or *.py found in {examples.resolve()}")
    # Pools the examples use.
    for pool, slots in EXAMPLE_POOLS.items():
        result = _schedctl(api, "pools", "set", pool, str(slots), "--description", "used by the examples")
        if result.returncode != 0:
            raise StepFailed(f"creating pool {pool} failed: {(result.stderr or result.stdout).strip()}")
    registered = []
    for path in files:
        # examples/ is the code bundle of every example (uploaded once): workers fetch it from their
        # registry and run each run's tasks at the version it pins (docs/bundles.md).
        result = _schedctl(api, "dags", "register", str(path), "--bundle", str(examples))
        if result.returncode != 0:
            raise StepFailed(
                f"registering {path} failed (schedctl exit {result.returncode}):\n"
                f"{(result.stderr or result.stdout).strip()}"
            )
        _ok(f"{escape(path.name)}: {escape(result.stdout.strip())}")
        registered.append(path.stem)
    return registered


def trigger_diamond(api: str) -> None:
    """Unpause ``diamond``, trigger it and wait for the run to succeed."""
    # New DAGs start paused (as on any deployment): the example run here is of one unpaused DAG.
    unpaused = _schedctl(api, "dags", "unpause", "diamond")
    if unpaused.returncode != 0:
        raise StepFailed(f"unpausing diamond failed: {(unpaused.stderr or unpaused.stdout).strip()}")
    # schedctl prints the run table itself; let it write straight to the terminal.
    result = _schedctl(
        api,
        "runs",
        "trigger",
        "diamond",
        "--wait",
        "--wait-timeout",
        str(RUN_WAIT_TIMEOUT),
        capture=False,
        timeout=RUN_WAIT_TIMEOUT + SCHEDCTL_TIMEOUT,
    )
    if result.returncode != 0:
        raise StepFailed(
            f"the diamond run did not succeed (schedctl exit {result.returncode}); "
            "see the table above and the logs in the log directory"
        )


def schedctl_usage(api: str, token_file: Path) -> list[str]:
    """The shell lines that point schedctl at the stack (api, admin token, this virtual environment)
    and a few commands to try, as printed at start-up."""
    return [
        f"export SCHEDD_API={shlex.quote(api)}",
        f"export SCHEDCTL_TOKEN=$(cat {shlex.quote(str(token_file))})",
        f". {shlex.quote(str(Path(sys.prefix) / 'bin' / 'activate'))}",
        "schedctl dags list",
        "schedctl runs trigger diamond --wait",
        "schedctl runs list",
        "schedctl runs get diamond/@latest -o json",
        "schedctl leader",
    ]


def _print_usage(cluster: Cluster, stack: DevStack, log_dir: Path) -> None:
    env = cluster.env()
    lines = [
        "",
        "[bold green]schedd is running.[/bold green]",
        "",
        f"Web UI: {cluster.web_url}/  (sign in with the admin token in {stack.base_dir / 'admin-token'})",
        "",
        "In another shell:",
        "",
        *(f"  {line}" for line in schedctl_usage(env["SCHEDD_API"], stack.base_dir / "admin-token")),
        "",
        "For tools that talk to the stores directly:",
        f"  export SCHEDD_DATABASE_URL={shlex.quote(env['SCHEDD_DATABASE_URL'])}",
        f"  export SCHEDD_ETCD_ENDPOINTS={shlex.quote(env['SCHEDD_ETCD_ENDPOINTS'])}",
        *(f"  export {name}={shlex.quote(value)}" for name, value in _etcd_root_env(stack).items()),
        "",
        "Prometheus metrics (docs/observability.md):",
        *(f"  {name:<12} http://{address}/metrics" for name, address in cluster.metrics.items()),
        "",
        f"Service logs: {log_dir}/*.log   PostgreSQL and etcd: {stack.base_dir}",
        "Press [bold]Ctrl-C[/bold] to stop everything.",
    ]
    console.print("\n".join(lines))


def _etcd_root_env(stack: DevStack) -> dict[str, str]:
    """etcd's ``root`` user, for etcdctl-like tools (``SCHEDD_ETCD_USER``, its password file)."""
    credentials = stack.etcd.credentials
    return credentials.service_env(ROOT_USER) if credentials is not None else {}


def _describe_dead(procs: list[ServiceProcess], servers: list[str]) -> str:
    parts = [p.describe_failure(f"{p.name} exited unexpectedly") for p in procs]
    parts += [f"{name} exited unexpectedly" for name in servers]
    return "\n\n".join(parts)


def run(
    directory: Annotated[
        Path, typer.Option("--dir", help="Where PostgreSQL, etcd and the service logs keep their data.")
    ] = DEFAULT_DIR,
    workers: Annotated[int, typer.Option(min=0, help="How many workers to start.")] = 2,
    schedulers: Annotated[int, typer.Option(min=1, help="How many scheduler replicas to start.")] = 1,
) -> None:
    """Run PostgreSQL, etcd and every schedd service locally until Ctrl-C."""
    stop_requested = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop_requested.is_set():
            return  # already stopping: let the bounded stop finish
        stop_requested.set()
        raise _StopRequested(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    stack = DevStack(directory, durable=True)
    cluster: Cluster | None = None
    exit_code = 0
    try:
        _step(f"starting PostgreSQL and etcd (data in {directory}/)")
        began = time.monotonic()
        stack.start()
        _ok(f"PostgreSQL on port {stack.postgres.port}, etcd at {stack.etcd.endpoint} ({_since(began)})")
        cluster = _make_cluster(stack, schedulers, workers)
        _start_cluster(cluster, stack, schedulers, workers)
        _run_examples(cluster, workers)
        _print_usage(cluster, stack, cluster.log_dir)
        _watch(cluster, stack, stop_requested)
    except _StopRequested as exc:
        console.print(f"\nreceived {exc}; stopping")
    except (StepFailed, DevstackError) as exc:
        console.print(f"[bold red]error:[/bold red] {escape(str(exc))}")
        exit_code = 1
    except subprocess.TimeoutExpired as exc:
        console.print(f"[bold red]error:[/bold red] {escape(' '.join(map(str, exc.cmd)))} timed out")
        exit_code = 1
    finally:
        stop_requested.set()  # from here on, further signals are ignored
        try:
            _step("stopping")
            if cluster is not None:
                cluster.stop()
            stack.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    console.print("stopped" if exit_code == 0 else "stopped after an error")
    raise typer.Exit(exit_code)


def _make_cluster(stack: DevStack, schedulers: int, workers: int) -> Cluster:
    """The services on the stack's servers, with authentication, on the default ports when free."""
    return Cluster(
        stack.postgres.url,
        stack.etcd.endpoint,
        stack.base_dir / "logs",
        schedulers=schedulers,
        workers=workers,
        api_port=DEFAULT_API_PORT if port_is_free(DEFAULT_API_PORT) else None,
        auth=True,
        etcd_credentials=stack.etcd.credentials,
        dags_paused_at_creation=True,
        web=True,
        web_port=DEFAULT_WEB_PORT if port_is_free(DEFAULT_WEB_PORT) else None,
        service_env={KEYS_FILE_ENV: str(_secrets_keys(stack.base_dir))},
    )


def _secrets_keys(base_dir: Path) -> Path:
    """The stack's key file for variables and connections (made once, kept with the stack's data)."""
    path = base_dir / "secrets-keys"
    if not path.exists():
        write_secret(path, new_key() + "\n")
    return path


def _start_cluster(cluster: Cluster, stack: DevStack, schedulers: int, workers: int) -> None:
    """Migrate, start every service, and keep the admin token (the environment and a 0600 file)."""
    _step("migrating the database")
    began = time.monotonic()
    cluster.migrate()
    _ok(f"schema at head ({_since(began)})")

    services = f"{_plural(schedulers, 'scheduler')}, {_plural(workers, 'worker')}"
    _step(f"starting the api, the registry, {services} and the web UI")
    began = time.monotonic()
    cluster.start(migrate=False)
    # schedctl, run by the steps below, reads its token from the environment.
    os.environ["SCHEDCTL_TOKEN"] = cluster.admin_token
    write_secret(stack.base_dir / "admin-token", cluster.admin_token + "\n")
    leader = cluster.leader()
    _ok(
        f"api at {cluster.api_address}, registry at {cluster.registry_address}, "
        f"leader {leader.name if leader else '?'}, workers {', '.join(cluster.workers) or '-'}, "
        f"web UI at {cluster.web_url} "
        f"({_since(began)})"
    )


def _run_examples(cluster: Cluster, workers: int) -> None:
    """Register the examples and, with workers, run ``diamond`` to its end."""
    examples = _examples_dir()
    _step(f"registering the examples in {examples}")
    registered = register_examples(cluster.api_address, examples)
    if "diamond" not in registered:
        raise StepFailed(f"{examples}/diamond.yaml is missing; it is the example run at start-up")

    _step("triggering diamond and waiting for it")
    if workers == 0:
        console.print("    [yellow]no workers: skipping the run[/yellow]")
    else:
        trigger_diamond(cluster.api_address)


def _watch(cluster: Cluster, stack: DevStack, stop_requested: threading.Event) -> None:
    """Return when a stop is requested; raise StepFailed when a process exits on its own (a worker
    that drained and exited 0 is reported once and let go)."""
    drained: set[str] = set()
    while not stop_requested.wait(_POLL_SECONDS):
        dead, dead_servers = cluster.dead(), stack.dead()
        for proc in [p for p in dead if p.name in cluster.workers and p.returncode == 0]:
            # A drained worker (schedctl workers drain) exits 0 once its tasks are done.
            if proc.name not in drained:
                console.print(f"    worker {proc.name} drained and exited; the rest keeps running")
                drained.add(proc.name)
        dead = [p for p in dead if p.name not in drained]
        if dead or dead_servers:
            raise StepFailed(_describe_dead(dead, dead_servers) + "\nstopping everything")


def _since(began: float) -> str:
    return f"{time.monotonic() - began:.1f}s"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def main() -> None:
    typer.run(run)


if __name__ == "__main__":
    main()
