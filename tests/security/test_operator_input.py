"""An operator's input (a run's conf, its params) is data, never code, on a cluster with tokens.

An operator may trigger runs with a conf; the DAG's author (an admin registers the DAG) decides
what the tasks run. The attacks: a conf value that would run commands when rendered into a shell
template (unquoted, inside double quotes, or as template text itself), and a conf that sets a param
the DAG never declared. Each goes through the real api and a real worker; the marker files the
injected commands would create must not exist, and the logs show the values as literal text.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from schedd.v1 import api_pb2
from schedd_devstack.services import Cluster
from schedd_rpc import convert
from tests.fixtures.services import cluster_on_own_database, schedctl

pytestmark = pytest.mark.e2e

RPC_TIMEOUT = 30.0
#: Liveness bound for a run of a few echo tasks to finish.
LIVENESS = 90.0
PAYLOAD = "x; id; cat /proc/$PPID/environ"
PYTHON_ECHO = "tests.chaos.noop_tasks:echo_params"


@pytest.fixture(scope="module")
def secured(
    database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with cluster_on_own_database(
        database_url,
        etcd_endpoints,
        tmp_path_factory.mktemp("operator_input"),
        workers=1,
        auth=True,
    ) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def operator(secured: Cluster) -> str:
    made = schedctl(
        secured.api_address, "--token", secured.admin_token, "tokens", "create", "op", "--role", "operator"
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


def register(cluster: Cluster, directory: Path, spec: dict[str, Any]) -> None:
    path = directory / f"{spec['dag_id']}.json"
    path.write_text(json.dumps(spec))
    done = schedctl(cluster.api_address, "--token", cluster.admin_token, "dags", "register", str(path))
    assert done.returncode == 0, done.stdout + done.stderr


def create_run(cluster: Cluster, token: str, dag_id: str, run_id: str, conf: dict[str, Any]) -> Any:
    """CreateRun through the real api as ``token``: the run, or the RpcError it was refused with."""
    request = api_pb2.CreateRunRequest(parent=f"dags/{dag_id}", run_id=run_id, conf=convert.struct(conf))
    with grpc.insecure_channel(cluster.api_address) as channel:
        stub = channel.unary_unary(
            "/schedd.v1.RunService/CreateRun", request_serializer=lambda m: m.SerializeToString()
        )
        try:
            return stub(request, timeout=RPC_TIMEOUT, metadata=(("authorization", f"Bearer {token}"),))
        except grpc.RpcError as exc:
            return exc


def wait_run(cluster: Cluster, dag_id: str, run_id: str) -> str:
    deadline = time.monotonic() + LIVENESS
    query = "SELECT state FROM dag_runs WHERE dag_id = $1 AND run_id = $2"
    while (state := cluster.fetchval(query, dag_id, run_id)) not in ("success", "failed"):
        assert time.monotonic() < deadline, f"run {dag_id}/{run_id} still {state} after {LIVENESS}s"
        time.sleep(0.2)
    return str(state)


def task_log(cluster: Cluster, dag_id: str, run_id: str, task_id: str, expected: str) -> str:
    """The task's log once it holds ``expected`` (output is stored apart from the result, so it may
    land a moment after the run ended), or as it is after LIVENESS seconds."""
    deadline = time.monotonic() + LIVENESS
    while True:
        logs = schedctl(
            cluster.api_address,
            "--token",
            cluster.admin_token,
            "tasks",
            "logs",
            f"{dag_id}/{run_id}",
            task_id,
            "--no-timestamps",
        )
        if (logs.returncode == 0 and expected in logs.stdout) or time.monotonic() > deadline:
            return logs.stdout + logs.stderr
        time.sleep(0.2)


class Injection:
    """One run of the ``injected`` DAG with hostile values in its conf, and the markers the
    injected commands would have created."""

    def __init__(self, cluster: Cluster, operator: str, directory: Path) -> None:
        self.cluster = cluster
        self.markers = [directory / f"injected-{i}" for i in range(4)]
        self.conf = {
            "msg": f"{PAYLOAD}; touch {self.markers[0]}",
            "quoted": (
                f'$(touch {self.markers[1]}) `touch {self.markers[2]}` "; touch {self.markers[3]}; echo "'
            ),
            "template": "{{ params.msg }} {% if true %}rendered{% endif %}",
        }
        register(
            cluster,
            directory,
            {
                "dag_id": "injected",
                "params": {"msg": "hello", "quoted": "", "template": ""},
                "tasks": [
                    {"task_id": "plain", "shell": {"command": "echo {{ params.msg }}"}},
                    {"task_id": "quoted", "shell": {"command": 'echo "quoted: {{ params.quoted }}"'}},
                    {"task_id": "template", "shell": {"command": "echo {{ params.template }}"}},
                    {
                        "task_id": "raw",
                        "shell": {"command": "echo {{ params.msg }} {{ '| tr a-z A-Z' | raw }}"},
                    },
                    {"task_id": "python", "python": {"target": PYTHON_ECHO}},
                ],
            },
        )
        created = create_run(cluster, operator, "injected", "r1", self.conf)
        assert not isinstance(created, grpc.RpcError), created
        self.state = wait_run(cluster, "injected", "r1")

    def log(self, task_id: str, expected: str) -> str:
        return task_log(self.cluster, "injected", "r1", task_id, expected)


@pytest.fixture(scope="module")
def injection(secured: Cluster, operator: str, tmp_path_factory: pytest.TempPathFactory) -> Injection:
    return Injection(secured, operator, tmp_path_factory.mktemp("injection"))


def test_a_conf_payload_in_a_shell_template_runs_nothing_and_is_printed_as_text(injection: Injection) -> None:
    expected = f"\n{injection.conf['msg']}\n"
    log = injection.log("plain", expected)
    assert not injection.markers[0].exists(), "the injected command ran on the worker"
    assert expected in log, log
    assert "uid=" not in log, log


def test_a_conf_value_inside_double_quotes_runs_nothing(injection: Injection) -> None:
    expected = f"\nquoted: {injection.conf['quoted']}\n"
    log = injection.log("quoted", expected)
    assert not [m for m in injection.markers[1:] if m.exists()], "an injected command ran on the worker"
    assert expected in log, log


def test_a_conf_holding_template_text_is_never_rendered(injection: Injection) -> None:
    expected = f"\n{injection.conf['template']}\n"
    assert expected in injection.log("template", expected)


def test_raw_inserts_the_authors_own_constant_as_shell_text(injection: Injection) -> None:
    expected = f"\n{injection.conf['msg'].upper()}\n"  # the author's pipe ran, the value did not
    assert expected in injection.log("raw", expected)
    assert not injection.markers[0].exists()
    assert injection.state == "success"


def test_a_python_task_receives_the_conf_as_data(injection: Injection) -> None:
    result = injection.cluster.fetchval(
        "SELECT ti.result FROM task_instances ti JOIN dag_runs r ON r.id = ti.run_pk "
        "WHERE r.dag_id = 'injected' AND r.run_id = 'r1' AND ti.task_id = 'python'"
    )
    assert json.loads(result) == {"params": injection.conf}


def test_a_conf_setting_an_undeclared_param_is_refused_and_makes_no_run(
    secured: Cluster, operator: str, tmp_path: Path
) -> None:
    tasks = [{"task_id": "t", "shell": {"command": "echo {{ params.msg }}"}}]
    register(secured, tmp_path, {"dag_id": "strict", "params": {"msg": "hi"}, "tasks": tasks})
    refused = create_run(secured, operator, "strict", "r1", {"msg": "ok", "cmd": "id"})
    assert isinstance(refused, grpc.RpcError)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT, refused.details()
    assert (refused.details() or "").startswith("conf.cmd: is not a param of the DAG"), refused.details()
    assert secured.fetchval("SELECT count(*) FROM dag_runs WHERE dag_id = 'strict'") == 0
    spec = {"dag_id": "open", "allow_undeclared_conf": True, "tasks": tasks}
    register(secured, tmp_path, spec)
    allowed = create_run(secured, operator, "open", "r1", {"msg": "ok", "cmd": "id"})
    assert not isinstance(allowed, grpc.RpcError), allowed
    assert wait_run(secured, "open", "r1") == "success"
    assert "\nok\n" in task_log(secured, "open", "r1", "t", "\nok\n")
