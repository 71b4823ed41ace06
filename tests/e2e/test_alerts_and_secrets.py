"""Variables, connections and notifications on a live cluster with authentication: managed with
schedctl under the roles, stored encrypted, read by Python tasks through their worker and masked in
their logs, refused to a DAG they are not granted to; failures and missed deadlines notified by a
signed webhook (to a local HTTP receiver), by email (to a local SMTP server) and by a notifier."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml

from schedd.v1 import secrets_pb2 as spb
from schedd_auth.secret_box import KEYS_ENV, new_key
from schedd_devstack.services import Cluster
from schedd_registry.notifications import verify_signature
from tests.e2e.receivers import PostServer, SmtpServer, post_server, smtp_server
from tests.e2e.secret_tasks import EVIDENCE_ENV
from tests.fixtures.services import cluster_on_own_database, schedctl
from tests.polling import wait_until

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
TASKS = "tests.e2e.secret_tasks"
LIVENESS = 60.0
TOKEN_VALUE = "tok-3f9a1c77e0b24d5e"
DB_PASSWORD = "pw-s3cr3t-9d81"
HOOK_KEY = "hook-signing-key-51ab"


@dataclass
class Env:
    cluster: Cluster
    work: Path
    evidence: Path
    hooks: PostServer
    smtp: SmtpServer
    viewer: str
    reader: str

    def ctl(
        self, *args: str, token: str | None = None, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        if stdin is None:
            return schedctl(self.cluster.api_address, "--token", token or self.cluster.admin_token, *args)
        return subprocess.run(
            [sys.executable, "-m", "schedctl.main", "--api", self.cluster.api_address, "--token",
             token or self.cluster.admin_token, *args],
            input=stdin, capture_output=True, text=True, timeout=60, check=False,
            env={k: v for k, v in os.environ.items() if not k.startswith("SCHEDD_")},
        )  # fmt: skip

    def ok(self, *args: str, token: str | None = None) -> str:
        result = self.ctl(*args, token=token)
        assert result.returncode == 0, f"schedctl {' '.join(args)}: {result.stderr}"
        return result.stdout

    def register(self, spec: dict[str, Any]) -> None:
        path = self.work / f"{spec['dag_id']}.yaml"
        path.write_text(yaml.safe_dump(spec, sort_keys=False))
        self.ok("dags", "register", str(path))

    def run_to_end(self, dag_id: str, run_id: str) -> str:
        self.ctl("runs", "trigger", dag_id, "--run-id", run_id, "--wait", "--wait-timeout", "60")
        rows = self.cluster.fetch(
            "SELECT state FROM dag_runs WHERE dag_id = $1 AND run_id = $2", dag_id, run_id
        )
        return str(rows[0]["state"])

    def evidence_of(self, task: str) -> list[dict[str, Any]]:
        lines = self.evidence.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r["task"] == task]

    def log_of(self, dag_id: str, task_id: str) -> str:
        rows = self.cluster.fetch(
            "SELECT l.data FROM task_logs l JOIN task_instances ti ON ti.id = l.ti_id "
            "JOIN dag_runs r ON r.id = ti.run_pk WHERE r.dag_id = $1 AND ti.task_id = $2 "
            "ORDER BY l.byte_offset",
            dag_id,
            task_id,
        )
        return "".join(str(r["data"]) for r in rows)


def _token(cluster: Cluster, name: str, role: str) -> str:
    result = schedctl(
        cluster.api_address, "--token", cluster.admin_token, "tokens", "create", name, "--role", role
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


@pytest.fixture(scope="module")
def env(database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    work = tmp_path_factory.mktemp("alerts")
    evidence = work / "evidence.jsonl"
    evidence.touch()
    mounted = work / "mounted"
    (mounted / "variables").mkdir(parents=True)
    (mounted / "variables" / "from_file").write_text("file-value\n")
    with (
        post_server() as hooks,
        smtp_server() as smtp,
        cluster_on_own_database(
            database_url,
            etcd_endpoints,
            work / "logs",
            workers=1,
            auth=True,
            cwd=REPO,
            # The api encrypts and the registry decrypts: both need the key (so do the backends).
            service_env={
                KEYS_ENV: new_key(),
                "SCHEDD_VAR_FROM_ENV": "env-value",
                "SCHEDD_SECRETS_DIR": str(mounted),
            },
            worker_env={EVIDENCE_ENV: str(evidence), "SCHEDD_TASK_ENV_ALLOW": EVIDENCE_ENV},
        ) as cluster,
    ):
        yield Env(
            cluster,
            work,
            evidence,
            hooks,
            smtp,
            _token(cluster, "v", "viewer"),
            _token(cluster, "s", "secrets"),
        )


def _set_secrets(env: Env) -> None:
    env.ok("variables", "set", "api_token", TOKEN_VALUE, "--description", "the API token")
    env.ok(
        "connections", "set", "warehouse", "--uri",
        f"postgres://etl:{DB_PASSWORD}@db.example:5432/analytics?sslmode=require",
    )  # fmt: skip
    env.ok("connections", "set", "hook_key", "--conn-type", "generic", "--password", HOOK_KEY)
    env.ok(
        "connections", "set", "smtp", "--conn-type", "smtp", "--host", env.smtp.host, "--port",
        str(env.smtp.port), "--extra", json.dumps({"from": "schedd@example.org"}),
    )  # fmt: skip


def test_schedctl_manages_variables_and_connections_under_the_roles(env: Env) -> None:
    _set_secrets(env)
    as_admin = json.loads(env.ok("-o", "json", "variables", "get", "api_token"))
    assert as_admin.get("value", "") == ""  # admin writes, but reads values back only with `secrets`
    as_reader = json.loads(env.ok("-o", "json", "variables", "get", "api_token", token=env.reader))
    assert as_reader["value"] == TOKEN_VALUE
    as_viewer = json.loads(env.ok("-o", "json", "connections", "get", "warehouse", token=env.viewer))
    assert as_viewer["conn_id"] == "warehouse"
    assert not any(as_viewer.get(field) for field in ("host", "login", "password", "schema", "port", "extra"))
    listed = env.ok("variables", "list", token=env.viewer)
    assert "api_token" in listed and TOKEN_VALUE not in listed
    # A viewer may not write: refused, exit 4, nothing changed.
    refused = env.ctl("variables", "set", "api_token", "other", token=env.viewer)
    assert refused.returncode == 4 and "PERMISSION_DENIED" in refused.stderr
    assert (
        json.loads(env.ok("-o", "json", "variables", "get", "api_token", token=env.reader))["value"]
        == TOKEN_VALUE
    )
    # A value given as "-" is read from standard input (it stays out of the command line).
    piped = env.ctl("variables", "set", "from_stdin", "-", stdin="piped-value\n")
    assert piped.returncode == 0, piped.stderr
    assert (
        json.loads(env.ok("-o", "json", "variables", "get", "from_stdin", token=env.reader))["value"]
        == "piped-value"
    )
    # Backends answer first: the environment and the mounted files.
    assert (
        json.loads(env.ok("-o", "json", "variables", "get", "from_env", token=env.reader))["source"]
        == "environment"
    )
    assert (
        json.loads(env.ok("-o", "json", "variables", "get", "from_file", token=env.reader))["value"]
        == "file-value"
    )
    # Import (Airflow's export format), delete.
    imported = env.work / "variables.json"
    imported.write_text(json.dumps({"imp_a": "1", "imp_b": {"nested": True}}))
    env.ok("variables", "import", str(imported))
    assert (
        json.loads(env.ok("-o", "json", "variables", "get", "imp_b", token=env.reader))["value"]
        == '{"nested": true}'
    )
    env.ok("variables", "delete", "imp_a")
    assert env.ctl("variables", "get", "imp_a").returncode == 3
    # Values never reach the audit log; the resource names what was changed.
    audit = env.cluster.fetch("SELECT method, resource, detail FROM audit_log")
    assert {"variables/api_token", "connections/warehouse", "variables/imp_a"} <= {
        r["resource"] for r in audit
    }
    assert TOKEN_VALUE not in json.dumps(audit, default=str) and DB_PASSWORD not in json.dumps(
        audit, default=str
    )


def test_values_are_stored_encrypted(env: Env) -> None:
    rows = env.cluster.fetch("SELECT value FROM variables UNION ALL SELECT value FROM connections")
    assert rows
    for row in rows:
        stored = bytes(row["value"])
        assert TOKEN_VALUE.encode() not in stored and DB_PASSWORD.encode() not in stored
        assert stored.startswith(b"gAAAAA")  # a Fernet token


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("variables", "set", "bad key", "v"), "key"),
        (("variables", "set", "nul_value", "a\x00b"), "variable.value"),
        (("variables", "set", "big", "x" * 70_000), "variable.value"),
        (("connections", "set", "bad_uri", "--uri", "no-scheme"), "connection.uri"),
        (("variables", "set", "grants", "v", "--dag", "not a dag"), "variable.dag_ids[0]"),
    ],
)
def test_bad_input_is_refused_naming_the_field_and_changes_nothing(
    env: Env, args: tuple[str, ...], field: str
) -> None:
    before = env.cluster.fetch(
        "SELECT count(*) AS n FROM variables UNION ALL SELECT count(*) FROM connections"
    )
    if "\x00" in "".join(args):
        request = spb.SetVariableRequest(variable=spb.Variable(key="nul_value", value="a\x00b"))
        with grpc.insecure_channel(env.cluster.api_address) as channel:
            stub = channel.unary_unary(
                "/schedd.v1.SecretsService/SetVariable", request_serializer=lambda m: m.SerializeToString()
            )
            with pytest.raises(grpc.RpcError) as caught:
                stub(request, timeout=10, metadata=(("authorization", f"Bearer {env.cluster.admin_token}"),))
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and field in str(
            caught.value.details()
        )
    else:
        result = env.ctl(*args)
        assert result.returncode == 2, result.stderr
        assert "INVALID_ARGUMENT" in result.stderr and field in result.stderr, result.stderr
    after = env.cluster.fetch(
        "SELECT count(*) AS n FROM variables UNION ALL SELECT count(*) FROM connections"
    )
    assert before == after


def test_a_task_reads_values_and_its_log_and_error_mask_them(env: Env) -> None:
    _set_secrets(env)
    env.register(
        {
            "dag_id": "reads",
            "tasks": [
                {
                    "task_id": "prints",
                    "upstream": [],
                    "python": {"target": f"{TASKS}:print_secrets"},
                    "on_success": [
                        {"webhook": {"url": env.hooks.url("/success"), "signing_connection": "hook_key"}}
                    ],
                },
                {
                    "task_id": "fails",
                    "upstream": [],
                    "python": {"target": f"{TASKS}:fail_with_secret"},
                    "retries": 1,
                    "retry_delay": "0.1s",
                    "on_retry": [{"email": {"to": ["retries@example.org"], "connection": "smtp"}}],
                    "on_failure": [
                        {"webhook": {"url": env.hooks.url("/failure"), "signing_connection": "hook_key"}},
                        {"email": {"to": ["ops@example.org"], "connection": "smtp", "subject": "[test]"}},
                        {"python": {"target": f"{TASKS}:RecordingNotifier.deliver"}},
                    ],
                },
            ],
        }
    )
    assert env.run_to_end("reads", "r1") == "failed"
    [seen] = env.evidence_of("print_secrets")
    assert seen["host"] == "db.example" and seen["port"] == 5432 and seen["login"] == "etl"
    assert seen["schema"] == "analytics" and seen["extra"] == {"sslmode": "require"}
    assert (
        seen["missing"] == "fallback"
        and seen["from_env"] == "env-value"
        and seen["from_file"] == "file-value"
    )
    log = env.log_of("reads", "prints")
    assert "the token is ***" in log and "the password is ***" in log, log
    assert TOKEN_VALUE not in log and DB_PASSWORD not in log
    failed_log = env.log_of("reads", "fails")
    assert "cannot use ***" in failed_log and TOKEN_VALUE not in failed_log
    errors = env.cluster.fetch("SELECT error FROM task_instances WHERE error IS NOT NULL")
    assert errors and all(TOKEN_VALUE not in str(r["error"]) for r in errors)
    # The failure is notified: a signed webhook, an email and the notifier, each once.
    [post] = wait_until("the failure webhook", lambda: env.hooks.at("/failure"), LIVENESS)
    assert verify_signature(HOOK_KEY, post.raw, post.headers)
    assert not verify_signature("another key", post.raw, post.headers)
    assert not verify_signature(HOOK_KEY, post.raw, post.headers, now=time.time() + 3600)  # a replay
    assert post.body["event"] == "failure" and post.body["task_id"] == "fails"
    mails = wait_until(
        "the failure email",
        lambda: [m for m in env.smtp.received() if m["To"] == "ops@example.org"],
        LIVENESS,
    )
    assert "failure" in str(mails[0]["Subject"])
    notified = wait_until("the notifier", lambda: env.evidence_of("notifier"), LIVENESS)
    assert notified[0]["event"]["event"] == "failure"
    # Success and retry are notified the same way.
    [success] = wait_until("the success webhook", lambda: env.hooks.at("/success"), LIVENESS)
    assert verify_signature(HOOK_KEY, success.raw, success.headers) and success.body["event"] == "success"
    retried = wait_until(
        "the retry email",
        lambda: [m for m in env.smtp.received() if m["To"] == "retries@example.org"],
        LIVENESS,
    )
    assert "retry" in str(retried[0]["Subject"])


def test_a_task_of_another_dag_cannot_read_a_value_not_granted_to_it(env: Env) -> None:
    env.ok("variables", "set", "only_for_owner", "owner-only-value", "--dag", "owner")
    env.register(
        {
            "dag_id": "owner",
            "tasks": [{"task_id": "t", "upstream": [], "python": {"target": f"{TASKS}:read_granted_here"}}],
        }
    )
    env.register(
        {
            "dag_id": "intruder",
            "tasks": [
                {"task_id": "t", "upstream": [], "python": {"target": f"{TASKS}:read_granted_elsewhere"}}
            ],
        }
    )
    assert env.run_to_end("owner", "r1") == "success"
    assert env.run_to_end("intruder", "r1") == "success"
    [refused] = env.evidence_of("read_granted_elsewhere")
    assert "may not read variable 'only_for_owner'" in refused["refused"]
    assert len(env.evidence_of("read_granted_here")) == 1


def test_a_missed_deadline_is_recorded_once_shown_and_notified(env: Env) -> None:
    _set_secrets(env)
    env.register(
        {
            "dag_id": "late",
            "deadline": {
                "reference": "DEADLINE_REFERENCE_QUEUED_AT",
                "interval": "2s",
                "callbacks": [
                    {"webhook": {"url": env.hooks.url("/deadline"), "signing_connection": "hook_key"}},
                    {"email": {"to": ["oncall@example.org"], "connection": "smtp"}},
                ],
            },
            "tasks": [{"task_id": "slow", "upstream": [], "python": {"target": f"{TASKS}:sleep_long"}}],
        }
    )
    env.ok("runs", "trigger", "late", "--run-id", "r1")
    [post] = wait_until("the deadline webhook", lambda: env.hooks.at("/deadline"), LIVENESS)
    assert post.body["event"] == "deadline_missed" and post.body["run_id"] == "r1"
    assert verify_signature(HOOK_KEY, post.raw, post.headers)
    wait_until(
        "the deadline email",
        lambda: [m for m in env.smtp.received() if m["To"] == "oncall@example.org"],
        LIVENESS,
    )
    shown = env.ok("runs", "get", "late/r1")
    assert "missed its deadline" in shown, shown
    explained = env.ok("explain", "late/r1", "slow")
    assert "the run missed its deadline" in explained, explained
    run = json.loads(env.ok("-o", "json", "runs", "get", "late/r1"))
    assert run["deadline_missed_time"] >= run["deadline_time"]
    env.ok("runs", "cancel", "late/r1")
    assert env.cluster.fetchval("SELECT count(*) FROM deadline_misses") == 1
    assert (
        env.cluster.fetchval("SELECT count(*) FROM outbox WHERE payload->>'event' = 'deadline_missed'") == 1
    )
    assert len(env.hooks.at("/deadline")) == 1
