"""Checks that a schedd container, as a deployment file defines it, agrees with the program it runs.

Each check returns the problems it found (an empty list: none), naming the container, so that a
test can both require none for the real files and require one for a deliberately broken copy.
What a program accepts comes from :mod:`tests.deploy.cli_surface` (the code itself).
"""

from __future__ import annotations

import ast
import math
import re
import shlex

from schedd_worker.agent import FINAL_ACK_WAIT, SHUTDOWN_STEP_SECONDS
from schedd_worker.main import default_kill_grace
from tests.deploy.cli_surface import ROOT, Command, Surface, image_scripts, surface
from tests.deploy.containers import Container, Probe

WORKER_SOURCES = ROOT / "services" / "schedd_worker"
_SHELLS = ("sh", "/bin/sh", "bash", "/bin/bash")
_SCHEDD_WORD = re.compile(r"^(schedd-[a-z-]+|schedctl)$")


def program(container: Container) -> tuple[str, list[str]] | None:
    """The schedd command a container runs and its arguments; for a shell script (``sh -c``), the
    first schedd command in it."""
    argv = container.argv
    if not argv:
        return None
    if argv[0] in _SHELLS and len(argv) >= 3 and argv[1].startswith("-") and "c" in argv[1]:
        words = shlex.split(argv[2].replace(";", " ; ").replace("|", " | "))
        for i, word in enumerate(words):
            if _SCHEDD_WORD.match(word):
                rest = []
                for w in words[i + 1 :]:
                    if w in (";", "|", "&&", "||"):
                        break
                    rest.append(w)
                return word, rest
        return None
    return argv[0], argv[1:]


def _flags_problems(where: str, command: Command, args: list[str]) -> list[str]:
    problems = []
    accepted = command.flags() | {"--help"}
    for word in args:
        if word in command.subcommands and not word.startswith("-"):
            command = command.subcommands[word]
            accepted |= command.flags()
            continue
        if word.startswith("-") and word != "-":
            flag = word.split("=", 1)[0]
            if flag not in accepted:
                problems.append(f"{where}: {flag} is not an option of the command")
    return problems


def check_command(container: Container) -> list[str]:
    """The container runs an installed schedd command with options it has."""
    found = program(container)
    if found is None:
        return [f"{container.where}: runs no schedd command ({container.argv!r})"]
    script, args = found
    if script not in image_scripts():
        return [f"{container.where}: {script!r} is not a command of the image ([project.scripts])"]
    problems = _flags_problems(container.where, surface(script).command, args)
    if container.overrides_entrypoint:
        problems.append(f"{container.where}: sets command, replacing the image's tini entry point; use args")
    return problems


def check_environment(container: Container) -> list[str]:
    """Every variable set is one the program reads; authentication is never switched off."""
    found = program(container)
    if found is None or found[0] not in image_scripts():
        return []
    known = surface(found[0])
    problems = [
        f"{container.where}: {name} is not read by {known.script}"
        for name in container.env
        if not known.accepts_env(name)
    ]
    if container.env.get("SCHEDD_AUTH") == "none":
        problems.append(f"{container.where}: SCHEDD_AUTH=none switches authentication off")
    return problems


def _setting(container: Container, known: Surface, envvar: str, args: list[str]) -> object:
    option = known.option_for_env(envvar)
    if option is not None:
        for i, word in enumerate(args):
            flag, eq, value = word.partition("=")
            if flag in option.flags:
                return value if eq else (args[i + 1] if i + 1 < len(args) else None)
    if envvar in container.env:
        return container.env[envvar]
    return known.default(envvar)


#: Programs whose own (non-metrics) listen address serves HTTP, not gRPC, with their health path.
HTTP_SERVERS = {"schedd-web": "/healthz"}


def listening(container: Container) -> tuple[set[int], int | None, set[int]]:
    """The gRPC ports, the metrics port and the other HTTP ports the container's program listens on."""
    found = program(container)
    if found is None or found[0] not in image_scripts():
        return set(), None, set()
    known = surface(found[0])
    grpc_ports: set[int] = set()
    http_ports: set[int] = set()
    metrics: int | None = None
    for option in known.command.options:
        if not option.listens:
            continue
        value = _setting(container, known, option.envvar, found[1])
        if not value:
            continue
        port = int(str(value).rpartition(":")[2])
        if not option.serves_grpc:
            metrics = port
        elif found[0] in HTTP_SERVERS:
            http_ports.add(port)
        else:
            grpc_ports.add(port)
    return grpc_ports, metrics, http_ports


def _http_problem(
    container: Container, port: int | None, path: str, metrics: int | None, http: set[int]
) -> str:
    """Empty when ``GET path`` on ``port`` is the metrics endpoint or the program's health page."""
    found = program(container)
    health = HTTP_SERVERS.get(found[0]) if found else None
    if (port == metrics and path == "/metrics") or (port in http and path == health):
        return ""
    served = [f":{metrics}/metrics"] + [f":{p}{health}" for p in sorted(http)]
    return f"{container.where}: HTTP probe on {port}{path}, not an endpoint it serves ({', '.join(served)})"


def _probe_problem(
    container: Container, probe: Probe, grpc_ports: set[int], metrics: int | None, http: set[int]
) -> str:
    where = container.where
    if probe.kind == "grpc":
        port = container.port_number(probe.port)
        return "" if port in grpc_ports else f"{where}: gRPC probe on {probe.port}, not a gRPC port it serves"
    if probe.kind == "http":
        return _http_problem(container, container.port_number(probe.port), probe.path, metrics, http)
    if probe.kind == "exec" and probe.argv[:1] == ("schedd-probe",):
        kind, address = (*probe.argv[1:3], "", "")[:2]
        number = address.rpartition(":")[2]
        port = int(number) if number.isdigit() else None
        if kind == "grpc":
            return (
                ""
                if port in grpc_ports
                else f"{where}: schedd-probe grpc {address}: not a port it serves that way"
            )
        if kind == "http":
            path = next((a.partition("=")[2] for a in probe.argv if a.startswith("--path=")), "/metrics")
            return _http_problem(container, port, path, metrics, http)
        return f"{where}: schedd-probe {kind} {address}: not a port it serves that way"
    return ""


def check_ports_and_probes(container: Container, *, kubernetes: bool) -> list[str]:
    """Declared ports are exactly the ones the program listens on; probes and scrape annotations
    point at those ports."""
    grpc_ports, metrics, http_ports = listening(container)
    serves = grpc_ports | http_ports | ({metrics} if metrics is not None else set())
    problems = []
    if kubernetes:
        if set(container.declared_ports) != serves:
            problems.append(
                f"{container.where}: declares ports {sorted(container.declared_ports)}, "
                f"listens on {sorted(serves)}"
            )
        scrape = container.annotations.get("prometheus.io/port")
        if scrape is not None and int(scrape) != metrics:
            problems.append(f"{container.where}: prometheus.io/port {scrape}, metrics on {metrics}")
    for probe in container.probes:
        problem = _probe_problem(container, probe, grpc_ports, metrics, http_ports)
        if problem:
            problems.append(problem)
        if probe.argv[:1] == ("schedd-probe",):
            problems += _flags_problems(
                container.where, surface("schedd-probe").command, list(probe.argv[1:])
            )
    return problems


def worker_shutdown_steps() -> int:
    """The steps of a worker's shutdown after its drain, each bounded by SHUTDOWN_STEP_SECONDS: the
    calls of ``schedd_worker.agent.bounded`` in the worker's code (the registry stream, the
    executor, the liveness lease)."""
    steps = 0
    for path in WORKER_SOURCES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "bounded":
                steps += 1
    return steps


def worker_shutdown_seconds(container: Container) -> float | None:
    """How long a worker may take from SIGTERM to exit: its drain grace, the kill grace of tasks
    still running then, the wait for the registry's last acknowledgements and the bounded
    shutdown steps; None for a container that runs no worker."""
    found = program(container)
    if found is None or found[0] != "schedd-worker":
        return None
    known = surface("schedd-worker")
    drain = float(str(_setting(container, known, "SCHEDD_DRAIN_GRACE", found[1])))
    kill = _setting(container, known, "SCHEDD_KILL_GRACE", found[1])
    if kill is None:
        ttl = int(str(_setting(container, known, "SCHEDD_WORKER_LEASE_TTL", found[1])))
        kill = default_kill_grace(ttl, bool(_setting(container, known, "SCHEDD_ETCD_ENDPOINTS", found[1])))
    return drain + float(str(kill)) + FINAL_ACK_WAIT + worker_shutdown_steps() * SHUTDOWN_STEP_SECONDS


def check_worker_drain(container: Container, *, kubernetes: bool) -> list[str]:
    """A worker gets the time its drain takes before it is killed; on Kubernetes its preStop hook
    starts the drain by signalling PID 1 (tini, passing it on) and waits for the exit."""
    needed = worker_shutdown_seconds(container)
    if needed is None:
        return []
    problems = []
    if container.grace is None or container.grace < math.ceil(needed):
        problems.append(
            f"{container.where}: killed {container.grace}s after SIGTERM; its drain may take {needed:g}s"
        )
    if kubernetes:
        hook = " ".join(container.pre_stop or [])
        if "kill -TERM 1" not in hook or "kill -0 1" not in hook:
            problems.append(f"{container.where}: no preStop hook that drains (kill -TERM 1, wait for exit)")
        if container.shares_process_namespace:
            problems.append(f"{container.where}: shareProcessNamespace makes PID 1 the pause process")
    return problems


def check_container(container: Container, *, kubernetes: bool) -> list[str]:
    return [
        *check_command(container),
        *check_environment(container),
        *check_ports_and_probes(container, kubernetes=kubernetes),
        *check_worker_drain(container, kubernetes=kubernetes),
    ]
