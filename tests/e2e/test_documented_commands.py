"""Every ``schedctl`` command that ``make run`` prints at start-up, then every one of README.md and
docs/cli.md, in that order and in document order, runs as written against a stack set up as
``make run`` sets it up: authentication on, new DAGs paused, the example pools created, examples/
registered with its code bundle, ``diamond`` unpaused and run once.

Each command runs with bash in a working directory holding the files the docs name, with the
environment ``make run`` tells a reader to set (``SCHEDD_API``, ``SCHEDCTL_TOKEN``, the virtual
environment). It must exit 0, or the code its trailing ``# exits N:`` comment gives, within
``COMMAND_TIMEOUT``. The docs' placeholders are filled in from the live stack by ``placeholders``.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from schedd_auth.secret_box import KEYS_ENV, new_key
from schedd_devstack import run_local
from schedd_devstack.credentials import write_secret
from schedd_devstack.services import Cluster
from tests.e2e.documented_commands import Command, Substitution, commands_in, run, substitute
from tests.fixtures.services import cluster_on_own_database, schedctl

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
DOCS = ("README.md", "docs/cli.md")
VENV_BIN = Path(sys.prefix) / "bin"
#: Seconds a command may take: ``--wait`` and ``--watch`` included.
COMMAND_TIMEOUT = 90.0

#: Files the docs name, written into the working directory.
FILES = {
    "variables.json": '{"region": "eu-west-1", "limits": {"rows": 1000}}\n',
    "my_dag.yaml": 'dag_id: my_dag\ntasks:\n  - task_id: hello\n    shell: {command: "echo hello"}\n',
    "dags/etl.yaml": 'dag_id: etl\ntasks:\n  - task_id: extract\n    shell: {command: "echo extracting"}\n',
    "flow.py": (
        "from schedd_sdk import dag\n"
        "from src.work import count\n\n\n"
        "@dag()\n"
        "def etl() -> None:\n"
        "    count()\n"
    ),
    "src/__init__.py": "",
    "src/work.py": "from schedd_sdk import task\n\n\n@task\ndef count() -> int:\n    return 3\n",
}
#: Files and directories the docs name, copied from the repository into the working directory.
COPIES = {"examples": "examples", "my_dags.py": "examples/etl_taskflow.py"}


@pytest.fixture(scope="module")
def make_run_stack(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    """A cluster as ``make run`` starts it, with the examples registered and ``diamond`` run once."""
    log_dir = tmp_path_factory.mktemp("documented_commands")
    with (
        cluster_on_own_database(
            database_url,
            etcd_endpoints,
            log_dir,
            auth=True,
            dags_paused_at_creation=True,
            service_env={KEYS_ENV: new_key()},  # as make run keeps one in its key file
        ) as cluster,
        pytest.MonkeyPatch.context() as env,
    ):
        env.setenv("SCHEDCTL_TOKEN", cluster.admin_token)
        run_local.register_examples(cluster.api_address, REPO / "examples")
        run_local.trigger_diamond(cluster.api_address)
        yield cluster


def placeholders(cluster: Cluster) -> list[Substitution]:
    """What the docs' placeholders stand for: read from the stack now (the run ``make run`` made) or
    when a command holds one."""

    def read(*args: str) -> Any:
        done = schedctl(cluster.api_address, "-o", "json", *args)
        assert done.returncode == 0, f"schedctl {' '.join(args)}: {done.stdout}{done.stderr}"
        return json.loads(done.stdout)

    made_by_make_run = str(read("runs", "list", "diamond")[0]["run_id"])  # diamond's only run so far
    return [
        Substitution(r"diamond/(?P<p><run id>)", lambda: made_by_make_run),
        Substitution(r"(?P<p><worker id>)", lambda: "worker-1"),
        # the DAG's first and newest versions
        Substitution(
            r"dags diff etl (?P<p>3f2a)\b", lambda: read("dags", "versions", "etl")[-1]["version_hash"]
        ),
        Substitution(
            r"dags diff etl \w+ (?P<p>9c1b)\b", lambda: read("dags", "versions", "etl")[0]["version_hash"]
        ),
        # the newest backfill
        Substitution(
            r"^schedctl backfill (?:get|pause|resume|cancel) (?P<p>3)\b",
            lambda: str(max(int(str(b["name"]).rsplit("/", 1)[1]) for b in read("backfill", "list"))),
        ),
    ]


def working_directory(root: Path) -> Path:
    """The directory the commands run in, with the files of ``FILES`` and ``COPIES``."""
    work = root / "work"
    for name, text in FILES.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    for name, source in COPIES.items():
        if (REPO / source).is_dir():
            shutil.copytree(REPO / source, work / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(REPO / source, work / name)
    return work


def shell_environment(home: Path) -> dict[str, str]:
    """This environment without schedd's settings and this virtual environment, a home of its own."""
    path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and Path(p) != VENV_BIN]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCHEDD_", "SCHEDCTL_", "VIRTUAL_ENV"))}
    env.update({"HOME": str(home), "PATH": os.pathsep.join(path), "COLUMNS": "200", "NO_COLOR": "1"})
    return env


# About 140 schedctl processes one after another: 2-3 minutes on an idle machine, several on a busy one.
@pytest.mark.timeout(900)
def test_every_documented_command_runs_as_written(make_run_stack: Cluster, tmp_path: Path) -> None:
    cluster = make_run_stack
    work = working_directory(tmp_path)
    token_file = work / ".schedd" / "admin-token"
    token_file.parent.mkdir()
    write_secret(token_file, cluster.admin_token + "\n")
    (tmp_path / "home").mkdir()
    env = shell_environment(tmp_path / "home")

    usage = run_local.schedctl_usage(cluster.api_address, token_file)
    prelude = "\n".join(line for line in usage if not line.startswith("schedctl "))
    printed = [
        Command(f"make run:{n}", line) for n, line in enumerate(usage, 1) if line.startswith("schedctl ")
    ]
    documented = [command for name in DOCS for command in commands_in(REPO / name, name)]
    reader_env = env | {
        "SCHEDD_API": cluster.api_address,
        "SCHEDCTL_TOKEN": cluster.admin_token,
        "PATH": f"{VENV_BIN}{os.pathsep}{env['PATH']}",
    }
    table = placeholders(cluster)
    for command in printed:
        print(run(command, command.text, cwd=work, env=env, prelude=prelude, timeout=COMMAND_TIMEOUT))
    for command in documented:
        text = substitute(command.text, table)
        print(run(command, text, cwd=work, env=reader_env, timeout=COMMAND_TIMEOUT))
