"""The environment a task starts with (``schedd_exec.environment``), its task user
(``schedd_exec.task_user``) and the start-up protections of a service (``schedd_exec.process_secrets``)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from schedd_exec.environment import TaskEnvironment
from schedd_exec.process_secrets import forget, refuse_secret_flags, secret_flags_given
from schedd_exec.shell import run_shell
from schedd_exec.task_user import TaskUser, TaskUserError, resolve_task_user

RUNNER = {
    "PATH": "/usr/bin:/bin",
    "HOME": "/home/runner",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONPATH": "/app",
    "SCHEDCTL_TOKEN": "sdt_000000000000_secret",
    "AWS_SECRET_ACCESS_KEY": "secret",
    "PGPASSWORD": "secret",
    "SCHEDD_WORKER_TOKEN": "sdt_111111111111_secret",
    "SCHEDD_TASK_DATABASE_URL": "postgresql://task:secret@db/schedd",
    "MYCOMPANY_REGION": "eu",
    "MYCOMPANY_ZONE": "b",
    "OTHER_SETTING": "x",
}


def test_only_the_allow_list_passes_by_default() -> None:
    env = TaskEnvironment.from_environ(RUNNER).variables
    assert dict(env) == {
        "PATH": "/usr/bin:/bin",
        "HOME": "/home/runner",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "PYTHONPATH": "/app",
    }


def test_the_operator_allows_names_and_prefixes() -> None:
    runner = {**RUNNER, "SCHEDD_TASK_ENV_ALLOW": "OTHER_SETTING, MYCOMPANY_*"}
    env = TaskEnvironment.from_environ(runner).variables
    assert {"OTHER_SETTING", "MYCOMPANY_REGION", "MYCOMPANY_ZONE"} <= set(env)
    assert not {"SCHEDCTL_TOKEN", "AWS_SECRET_ACCESS_KEY", "PGPASSWORD", "SCHEDD_TASK_ENV_ALLOW"} & set(env)


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ("*", "neither a variable name nor a prefix"),
        ("SCHEDD_WORKER_TOKEN", "schedd's own settings never pass"),
        ("SCHEDD_*", "schedd's own settings never pass"),
        ("schedd_*", "schedd's own settings never pass"),
        ("A-B", "neither a variable name nor a prefix"),
        ("A*B", "neither a variable name nor a prefix"),
    ],
)
def test_an_allow_list_entry_passing_secrets_or_malformed_is_refused(entry: str, reason: str) -> None:
    with pytest.raises(ValueError, match="SCHEDD_TASK_ENV_ALLOW") as raised:
        TaskEnvironment.from_environ({"SCHEDD_TASK_ENV_ALLOW": f"OK_NAME,{entry}"})
    assert reason in str(raised.value) and repr(entry) in str(raised.value)


def test_the_attempt_env_goes_on_top() -> None:
    environment = TaskEnvironment.from_environ(RUNNER)
    env = environment.for_attempt({"SCHEDD_DAG_ID": "d", "PATH": "/task/bin"})
    assert env["SCHEDD_DAG_ID"] == "d" and env["PATH"] == "/task/bin" and env["LANG"] == "C.UTF-8"


def test_a_task_user_has_its_own_home_and_name_and_a_setpriv_prefix() -> None:
    user = TaskUser("alice", 1001, 1002, "/home/alice", "/usr/bin/setpriv")
    environment = TaskEnvironment.from_environ(RUNNER, user)
    assert environment.variables["HOME"] == "/home/alice"
    assert environment.variables["USER"] == environment.variables["LOGNAME"] == "alice"
    prefix = environment.command_prefix(death_signal=True)
    assert prefix == (
        "/usr/bin/setpriv",
        "--reuid=1001",
        "--regid=1002",
        "--init-groups",
        "--pdeathsig",
        "KILL",
        "--",
    )
    assert "--pdeathsig" not in environment.command_prefix(death_signal=False)


def test_a_task_user_is_refused_unless_root_and_real_and_not_root() -> None:
    with pytest.raises(TaskUserError, match=r"needs a worker started as root.*uid 1000"):
        resolve_task_user("nobody", euid=1000)
    with pytest.raises(TaskUserError, match="no such user 'no-such-user-schedd'"):
        resolve_task_user("no-such-user-schedd", euid=0)
    with pytest.raises(TaskUserError, match="is root"):
        resolve_task_user("root", euid=0)
    with pytest.raises(TaskUserError, match="is root"):
        resolve_task_user("0", euid=0)


async def test_a_shell_task_sees_the_allow_list_and_its_attempt_only() -> None:
    output = bytearray()
    environment = TaskEnvironment.from_environ({**RUNNER, "PATH": os.environ["PATH"]})
    outcome = await run_shell(
        "env",
        env={"SCHEDD_DAG_ID": "d"},
        timeout=10,
        kill_grace=1,
        on_output=output.extend,
        environment=environment,
    )
    assert outcome.succeeded, outcome.error
    names = {line.split("=", 1)[0] for line in output.decode().splitlines() if "=" in line}
    assert "SCHEDD_DAG_ID" in names and "LC_ALL" in names
    assert not {"SCHEDCTL_TOKEN", "AWS_SECRET_ACCESS_KEY", "SCHEDD_WORKER_TOKEN", "OTHER_SETTING"} & names


def test_secret_flags_on_the_command_line_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["schedd-scheduler", "--database-url=postgresql://u:p@h/d", "--lease-ttl", "2"]
    assert secret_flags_given(argv, ["--database-url", "--task-database-url"]) == ["--database-url"]
    assert secret_flags_given(["x", "--database-url-file", "f"], ["--database-url"]) == []
    with pytest.raises(SystemExit) as exited:
        refuse_secret_flags("schedd-scheduler", {"--database-url": "SCHEDD_DATABASE_URL"}, argv)
    assert exited.value.code == 2
    assert "--database-url (use SCHEDD_DATABASE_URL)" in capsys.readouterr().err


def test_forget_removes_the_variables() -> None:
    environ = {"SCHEDD_WORKER_TOKEN": "t", "KEEP": "1"}
    forget(environ, ["SCHEDD_WORKER_TOKEN", "ABSENT"])
    assert environ == {"KEEP": "1"}


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_DUMPABLE is Linux's")
def test_a_process_can_make_itself_undumpable() -> None:
    code = (
        "import ctypes; from schedd_exec.process_secrets import make_undumpable; "
        "print(make_undumpable(), ctypes.CDLL(None).prctl(3, 0, 0, 0, 0))"  # PR_GET_DUMPABLE
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "0"]
