"""Task code cannot read a secret of the process that runs it (docs/security.md, "What task code can read").

One cluster with tokens on, and three places where tasks run, each asked to run the probe of
``tests.security.secret_probe_tasks`` as a shell task and as a Python task (warm child):

* a worker started as root whose tasks run as ``nobody`` (``SCHEDD_TASK_USER``);
* a worker started as ``nobody`` whose tasks run as ``nobody`` too (non-dumpable is all that
  stands between a task and its worker's memory);
* a scheduler started as ``nobody`` running tasks itself (``SCHEDD_EXECUTOR=local``) with its
  own database URL.

Besides: a task beside a transactional one (same worker, same user) cannot read the task role's
database URL from that one's warm child, and a task user is refused at start-up unless the worker
is root and the user exists.

Each service has secrets in its environment: its worker token, database URLs with a password,
and ``CANARY_`` values an operator's shell might leave there (``SCHEDCTL_TOKEN``). The probe tries
the service's ``/proc/<pid>/environ``, ``cmdline`` and memory, and its own environment. Root can
read everything regardless, so every task here runs as an unprivileged user; the services run
with an interpreter that user can execute (see :func:`reachable_python`).
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from schedd_coord import access
from schedd_coord.credentials import PASSWORD_FILE_ENV
from schedd_devstack.postgres import create_database, drop_database, with_database
from schedd_devstack.services import Cluster
from tests.fixtures.services import schedctl
from tests.security.secret_probe_tasks import MARKER

pytestmark = pytest.mark.e2e

TASK_USER = "nobody"
PROBE = "tests.security.secret_probe_tasks"
WAIT = 120.0


def _as_user(user: str) -> list[str]:
    return ["setpriv", f"--reuid={user}", f"--regid={pwd.getpwnam(user).pw_gid}", "--clear-groups", "--"]


def _runs_as(user: str, python: str) -> bool:
    """Whether ``user`` can run ``python``, and that python can start itself again (as services do)."""
    again = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import grpc'], check=True)"
    result = subprocess.run(
        [*_as_user(user), python, "-c", again],
        capture_output=True,
        timeout=60,
        check=False,
    )
    return result.returncode == 0


@pytest.fixture(scope="module")
def reachable_python() -> Iterator[str]:
    """An interpreter ``nobody`` can run that imports this checkout: ours, or else (ours lives in a
    directory only root may enter, as under ``/root``) a virtualenv of the system's interpreter of the
    same version whose site directory adds ours."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("running processes as another user needs root and setpriv")
    if _runs_as(TASK_USER, sys.executable):
        yield sys.executable
        return
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    system = shutil.which(f"python{version}", path="/usr/local/bin:/usr/bin")
    assert system, f"{sys.executable} is not reachable by {TASK_USER} and there is no system python{version}"
    root = Path(tempfile.mkdtemp(prefix="schedd-task-secrets-"))
    try:
        subprocess.run([system, "-m", "venv", "--without-pip", str(root / "venv")], check=True, timeout=120)
        site = root / "venv" / "lib" / f"python{version}" / "site-packages"
        ours = sysconfig.get_paths()["purelib"]
        (site / "schedd_checkout.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
        subprocess.run(["chmod", "-R", "a+rX", str(root)], check=True)
        python = str(root / "venv" / "bin" / "python")
        assert _runs_as(TASK_USER, python), f"{TASK_USER} cannot run {python}"
        yield python
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _owned_copy(path: Path, user: str, directory: Path) -> str:
    """A copy of ``path`` that only ``user`` may read (a service run as ``user`` reads its etcd password)."""
    copy = directory / f"{user}-{path.name}"
    shutil.copyfile(path, copy)
    entry = pwd.getpwnam(user)
    os.chown(copy, entry.pw_uid, entry.pw_gid)
    copy.chmod(0o600)
    return str(copy)


def _home_of(user: str, directory: Path) -> str:
    """A home directory for a service run as ``user`` (its bundle cache goes there)."""
    home = directory / f"home-{user}"
    home.mkdir(mode=0o700)
    entry = pwd.getpwnam(user)
    os.chown(home, entry.pw_uid, entry.pw_gid)
    return str(home)


def _etcd_password_as(cluster: Cluster, etcd_user: str, user: str, directory: Path) -> dict[str, str]:
    if cluster.etcd_credentials is None:
        return {}
    path = cluster.etcd_credentials.password_file(etcd_user)
    return {PASSWORD_FILE_ENV: _owned_copy(path, user, directory)}


def _password_of(url: str) -> list[str]:
    password = urlsplit(url).password
    return [password] if password else []


@dataclass
class Stack:
    cluster: Cluster
    #: every secret a service was given, which no task may find
    secrets: list[str]
    python: str
    tmp: Path
    #: each execution place's queue, by name
    queues: dict[str, str]


@pytest.fixture(scope="module")
def stack(
    reachable_python: str, database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    name = f"t_{secrets.token_hex(8)}"
    create_database(database_url, name)
    tag = secrets.token_hex(3)
    canaries = {
        "SCHEDCTL_TOKEN": f"CANARY_schedctl{secrets.token_hex(8)}",
        "CLOUD_CREDENTIAL": f"CANARY_cloud{secrets.token_hex(8)}",
    }
    allowed = {"PROBE_ALLOWED_SETTING": "visible", "SCHEDD_TASK_ENV_ALLOW": "PROBE_ALLOWED_*"}
    files: Path | None = None
    try:
        url = with_database(database_url, name)
        with Cluster(
            url,
            etcd_endpoints,
            tmp_path_factory.mktemp("secrets"),
            workers=0,
            auth=True,
            python=reachable_python,
        ) as cluster:
            worker_env = {**canaries, **allowed}
            queues = {"task-user": f"task-user-{tag}", "same-user": f"same-user-{tag}", "local": "default"}
            cluster.add_worker(
                f"w-task-user-{tag}",
                env={
                    **worker_env,
                    "SCHEDD_WORKER_QUEUES": queues["task-user"],
                    "SCHEDD_TASK_USER": TASK_USER,
                },
            )
            files = Path(tempfile.mkdtemp(prefix="schedd-task-secrets-files-"))
            files.chmod(0o711)
            unprivileged = {"HOME": _home_of(TASK_USER, files)}
            cluster.add_worker(
                f"w-same-user-{tag}",
                env={
                    **worker_env,
                    **unprivileged,
                    **_etcd_password_as(cluster, access.WORKER_USER, TASK_USER, files),
                    "SCHEDD_WORKER_QUEUES": queues["same-user"],
                },
                user=TASK_USER,
            )
            cluster.add_scheduler(
                env={
                    **canaries,
                    **allowed,
                    **unprivileged,
                    **_etcd_password_as(cluster, access.SCHEDULER_USER, TASK_USER, files),
                    "SCHEDD_EXECUTOR": "local",
                },
                user=TASK_USER,
            )
            yield Stack(
                cluster,
                [
                    cluster.worker_token,
                    *canaries.values(),
                    *_password_of(url),
                    *_password_of(cluster.task_database_url),
                ],
                reachable_python,
                tmp_path_factory.mktemp("dags"),
                queues,
            )
    finally:
        drop_database(database_url, name)
        if files is not None:
            shutil.rmtree(files, ignore_errors=True)


def _admin(stack: Stack, *args: str) -> subprocess.CompletedProcess[str]:
    return schedctl(stack.cluster.api_address, "--token", stack.cluster.admin_token, *args)


def _run(stack: Stack, spec: dict[str, Any]) -> None:
    """Register ``spec`` and run it to its end (successfully)."""
    dag_id = spec["dag_id"]
    directory = stack.tmp / dag_id
    directory.mkdir()
    (directory / "dag.yaml").write_text(yaml.safe_dump(spec))
    registered = _admin(stack, "dags", "register", str(directory / "dag.yaml"))
    assert registered.returncode == 0, registered.stdout + registered.stderr
    ran = _admin(stack, "runs", "trigger", dag_id, "--run-id", "r1", "--wait", "--wait-timeout", str(WAIT))
    assert ran.returncode == 0, ran.stdout + ran.stderr


def _result(stack: Stack, dag_id: str, task_id: str) -> dict[str, Any]:
    result = stack.cluster.fetchval(
        "SELECT ti.result FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = $1 AND r.run_id = 'r1' AND ti.task_id = $2",
        dag_id,
        task_id,
    )
    value: dict[str, Any] = json.loads(result) if isinstance(result, str) else result
    return value


def _probe_run(stack: Stack, place: str) -> dict[str, dict[str, Any]]:
    """Run the probe as a shell task and as a Python task where ``place`` runs tasks; the reports."""
    dag_id = f"secrets_{place.replace('-', '_')}"
    queue = stack.queues[place]
    _run(
        stack,
        {
            "dag_id": dag_id,
            "tasks": [
                {"task_id": "shell", "queue": queue, "shell": {"command": f"{stack.python} -m {PROBE}"}},
                {"task_id": "python", "queue": queue, "python": {"target": f"{PROBE}:probe"}},
            ],
        },
    )
    logs = _admin(stack, "tasks", "logs", f"{dag_id}/r1", "shell", "--no-timestamps")
    assert logs.returncode == 0, logs.stderr
    line = next((x for x in logs.stdout.splitlines() if x.startswith(MARKER)), None)
    assert line is not None, f"the shell probe printed no report: {logs.stdout}"
    return {"shell": json.loads(line[len(MARKER) :]), "python": _result(stack, dag_id, "python")}


def _assert_nothing_found(stack: Stack, reports: dict[str, dict[str, Any]]) -> None:
    for kind, report in reports.items():
        shown = json.dumps(report, indent=1)
        assert report["service_pid"], f"{kind}: the probe found no service process: {shown}"
        found = [
            *report["own_environment"],
            *report["environ"]["secrets"],
            *report["cmdline"]["secrets"],
            *report["mem"]["secrets"],
        ]
        leaked = [s for s in stack.secrets if any(s in f for f in found)]
        assert not leaked, f"{kind}: the task read {leaked}: {shown}"
        assert report["uid"] != 0, f"{kind}: the task ran as root: {shown}"
        assert report["environ"]["error"] == "PermissionError", f"{kind}: {shown}"
        assert report["mem"]["error"] == "PermissionError", f"{kind}: {shown}"
        assert report["cmdline"]["error"] == "", f"{kind}: {shown}"
        unexpected = {"SCHEDCTL_TOKEN", "CLOUD_CREDENTIAL", "SCHEDD_TASK_ENV_ALLOW"} & set(
            report["own_variables"]
        )
        assert not unexpected, f"{kind}: inherited {unexpected}"
        assert "PROBE_ALLOWED_SETTING" in report["own_variables"], (
            f"{kind}: the operator's allow-list: {shown}"
        )


def test_a_task_run_as_another_user_reads_no_secret_of_its_root_worker(stack: Stack) -> None:
    _assert_nothing_found(stack, _probe_run(stack, "task-user"))


def test_a_task_of_an_unprivileged_worker_reads_no_secret_of_its_worker(stack: Stack) -> None:
    _assert_nothing_found(stack, _probe_run(stack, "same-user"))


def test_a_task_of_a_local_executor_reads_no_secret_of_its_scheduler(stack: Stack) -> None:
    _assert_nothing_found(stack, _probe_run(stack, "local"))


def test_a_task_reads_no_secret_of_a_transactional_task_running_beside_it(stack: Stack) -> None:
    marker = Path(tempfile.gettempdir()) / f"schedd-sibling-{secrets.token_hex(6)}"
    params = {"started": f"{marker}.started", "done": f"{marker}.done"}
    queue = stack.queues["task-user"]
    try:
        _run(
            stack,
            {
                "dag_id": "secrets_sibling",
                "tasks": [
                    {
                        "task_id": "holder",
                        "queue": queue,
                        "transactional": True,
                        "params": dict(params),
                        "python": {"target": f"{PROBE}:hold_transaction"},
                    },
                    {
                        "task_id": "prober",
                        "queue": queue,
                        "params": dict(params),
                        "python": {"target": f"{PROBE}:probe_sibling"},
                    },
                ],
            },
        )
    finally:
        for path in params.values():
            Path(path).unlink(missing_ok=True)
    report = _result(stack, "secrets_sibling", "prober")
    leaked = [s for s in stack.secrets if any(s in f for f in report["mem"]["secrets"])]
    assert not leaked, f"the task read {leaked} from its sibling: {report}"
    assert report["mem"]["error"] == "PermissionError", report


def _worker_start(python: str, env: dict[str, str], user: str = "") -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")}
    prefix = _as_user(user) if user else []
    try:
        return subprocess.run(
            [*prefix, python, "-m", "schedd_worker.main"],
            env={**base, "SCHEDD_REGISTRY": "127.0.0.1:9", **env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the worker started instead of refusing: {exc.stderr!r}") from None


def test_a_task_user_is_refused_at_start_up_unless_it_exists_and_the_worker_is_root(
    reachable_python: str,
) -> None:
    unknown = _worker_start(reachable_python, {"SCHEDD_TASK_USER": "no-such-user-schedd"})
    assert unknown.returncode == 2, unknown.stderr
    assert "no-such-user-schedd" in unknown.stderr and "no such user" in unknown.stderr, unknown.stderr
    unprivileged = _worker_start(reachable_python, {"SCHEDD_TASK_USER": "daemon"}, user=TASK_USER)
    assert unprivileged.returncode == 2, unprivileged.stderr
    assert "root" in unprivileged.stderr and "SCHEDD_TASK_USER" in unprivileged.stderr, unprivileged.stderr
