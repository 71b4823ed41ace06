"""DAG versions through schedctl and the api: a directory registers every DAG in it or none,
``--dry-run`` stores nothing and says what would change, ``--diff`` shows it, versions are listed
newest first and diffed by hash prefix, and ``@latest`` names a DAG's newest run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.services import RunningCluster

pytestmark = pytest.mark.e2e


def spec(dag_id: str, *commands: str) -> str:
    return json.dumps(
        {
            "dag_id": dag_id,
            "tasks": [{"task_id": f"t{i}", "shell": {"command": c}} for i, c in enumerate(commands)],
        }
    )


def changed(diff: str) -> tuple[set[str], set[str]]:
    """The removed and added lines of a unified diff, stripped."""
    lines = [line for line in diff.splitlines() if not line.startswith(("---", "+++"))]
    return (
        {line[1:].strip() for line in lines if line.startswith("-")},
        {line[1:].strip() for line in lines if line.startswith("+")},
    )


def versions(cluster: RunningCluster, dag_id: str) -> list[dict[str, object]]:
    out = cluster.schedctl("-o", "json", "dags", "versions", dag_id)
    assert out.returncode == 0, out.stderr
    return list(json.loads(out.stdout))


def test_a_directory_registers_every_dag_or_none(module_cluster: RunningCluster, tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(spec("ver_dir_a", "true"))
    (tmp_path / "b.json").write_text(spec("ver_dir_b", "true"))
    (tmp_path / "notes.txt").write_text("not a DAG file")
    done = module_cluster.schedctl("dags", "register", str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "ver_dir_a" in done.stdout and "ver_dir_b" in done.stdout
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "good.json").write_text(spec("ver_dir_good", "true"))
    (broken / "bad.json").write_text(
        json.dumps({"dag_id": "ver_dir_bad", "tasks": [{"task_id": "x", "retries": -1}]})
    )
    refused = module_cluster.schedctl("dags", "register", str(broken))
    assert refused.returncode == 2, refused.stderr
    listed = module_cluster.schedctl("-o", "name", "dags", "list").stdout.split()
    assert "dags/ver_dir_good" not in listed and "dags/ver_dir_bad" not in listed
    twice = tmp_path / "twice"
    twice.mkdir()
    (twice / "one.json").write_text(spec("ver_dup", "true"))
    (twice / "two.json").write_text(spec("ver_dup", "false"))
    dup = module_cluster.schedctl("dags", "register", str(twice))
    assert dup.returncode == 2 and "defined in both" in dup.stderr


def test_dry_run_and_diff_store_nothing(module_cluster: RunningCluster, tmp_path: Path) -> None:
    path = tmp_path / "ver_dry.json"
    path.write_text(spec("ver_dry", "echo one"))
    assert module_cluster.schedctl("dags", "register", str(path)).returncode == 0
    path.write_text(spec("ver_dry", "echo two"))
    dry = module_cluster.schedctl("dags", "register", str(path), "--dry-run", "--diff")
    assert dry.returncode == 0, dry.stderr
    assert "would register new version" in dry.stdout
    assert changed(dry.stdout) == ({"command: echo one"}, {"command: echo two"})
    assert len(versions(module_cluster, "ver_dry")) == 1
    same = module_cluster.schedctl("dags", "register", str(tmp_path / "ver_dry.json"), "--dry-run")
    assert "would register new version" in same.stdout  # still the changed file
    assert module_cluster.schedctl("dags", "register", str(path)).returncode == 0
    unchanged = module_cluster.schedctl("dags", "register", str(path), "--dry-run", "--diff")
    assert "unchanged" in unchanged.stdout and "no changes" in unchanged.stdout


def test_versions_newest_first_and_diff_by_prefix(module_cluster: RunningCluster, tmp_path: Path) -> None:
    path = tmp_path / "ver_hist.json"
    for command in ("echo a", "echo b", "echo c"):
        path.write_text(spec("ver_hist", command))
        assert module_cluster.schedctl("dags", "register", str(path)).returncode == 0
    found = versions(module_cluster, "ver_hist")
    assert len(found) == 3
    latest = json.loads(module_cluster.schedctl("-o", "json", "dags", "get", "ver_hist").stdout)[
        "latest_version"
    ]
    assert found[0]["version_hash"] == latest
    oldest = str(found[-1]["version_hash"])
    diff = module_cluster.schedctl("dags", "diff", "ver_hist", oldest[:12])
    assert diff.returncode == 0, diff.stderr
    assert changed(diff.stdout) == ({"command: echo a"}, {"command: echo c"})
    assert module_cluster.schedctl("dags", "diff", "ver_hist", "ffffffffffff0").returncode == 3
    assert module_cluster.schedctl("dags", "versions", "no_such_dag").returncode == 3


def test_latest_names_the_newest_run(module_cluster: RunningCluster, tmp_path: Path) -> None:
    path = tmp_path / "ver_latest.json"
    path.write_text(spec("ver_latest", "true"))
    assert module_cluster.schedctl("dags", "register", str(path)).returncode == 0
    assert module_cluster.schedctl("runs", "get", "ver_latest/@latest").returncode == 3  # no runs yet
    for run_id in ("first", "second"):
        assert (
            module_cluster.schedctl("runs", "trigger", "ver_latest", "--run-id", run_id, "--wait").returncode
            == 0
        )
    shown = json.loads(module_cluster.schedctl("-o", "json", "runs", "get", "ver_latest/@latest").stdout)
    assert shown["run_id"] == "second"
