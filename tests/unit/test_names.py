"""Resource names: formatting and parsing, with errors naming the request field."""

from __future__ import annotations

import pytest

from schedd_core.errors import InvalidArgument
from schedd_rpc.names import (
    dag_name,
    parse_dag_name,
    parse_run_name,
    parse_task_key,
    parse_task_name,
    run_name,
    task_name,
)


def test_format() -> None:
    assert dag_name("etl") == "dags/etl"
    assert run_name("etl", "r1") == "dags/etl/runs/r1"
    assert task_name("etl", "r1", "load") == "dags/etl/runs/r1/tasks/load"


def test_parse_round_trips() -> None:
    assert parse_dag_name(dag_name("etl")) == "etl"
    assert parse_run_name(run_name("etl", "manual__2026-01-01T00.00")) == ("etl", "manual__2026-01-01T00.00")


@pytest.mark.parametrize(
    "name",
    ["", "etl", "dags", "dags/", "/etl", "dag/etl", "DAGS/etl", "dags/etl/", "dags/etl/runs/1", "dags//x"],
)
def test_bad_dag_name(name: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_dag_name(name)
    assert info.value.field == "name"
    assert repr(name) in info.value.problem
    assert "dags/{dag_id}" in info.value.problem


@pytest.mark.parametrize(
    "name",
    [
        "",
        "dags/etl",
        "dags/etl/runs",
        "dags/etl/runs/",
        "dags//runs/r1",
        "dags/etl/run/r1",
        "dag/etl/runs/r1",
        "dags/etl/runs/r1/tasks/a",
        "dags/etl/runs/r1/",
    ],
)
def test_bad_run_name(name: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_run_name(name)
    assert info.value.field == "name"
    assert repr(name) in info.value.problem
    assert "dags/{dag_id}/runs/{run_id}" in info.value.problem


def test_errors_name_the_given_field() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_dag_name("nope", "parent")
    assert info.value.field == "parent"
    assert str(info.value).startswith("parent: ")
    with pytest.raises(InvalidArgument) as info:
        parse_run_name("nope", field="run")
    assert info.value.field == "run"


def test_task_names_carry_the_key() -> None:
    assert task_name("etl", "r1", "load[3]") == "dags/etl/runs/r1/tasks/load[3]"
    assert parse_task_name("dags/etl/runs/r1/tasks/load") == ("etl", "r1", "load")
    assert parse_task_name("dags/etl/runs/r1/tasks/load[0]") == ("etl", "r1", "load[0]")
    assert parse_task_name("dags/etl/runs/r1/tasks/load[120]") == ("etl", "r1", "load[120]")
    assert parse_task_key("load[7]", "task") == ("load", 7)
    assert parse_task_key("load", "task") == ("load", -1)


@pytest.mark.parametrize(
    "key", ["t[x]", "t[01]", "t[-1]", "t[]", "t[1]x", "t[1][2]", "[1]", "t]", "t[", "t[ 1]", "t[1234567890]"]
)
def test_bad_task_keys(key: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_task_name(f"dags/etl/runs/r1/tasks/{key}")
    assert info.value.field == "name"
    assert repr(key) in info.value.problem
    assert "task_id[map_index]" in info.value.problem
    with pytest.raises(InvalidArgument) as info:
        parse_task_key(key, "task_ids[2]")
    assert info.value.field == "task_ids[2]"


def test_a_bad_task_id_in_a_key_is_named() -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_task_name("dags/etl/runs/r1/tasks/-bad[1]", "parent")
    assert info.value.field == "parent"
    assert "is not a valid id" in info.value.problem


@pytest.mark.parametrize(
    "name",
    [
        "dags/etl/runs/r1/tasks",
        "dags/etl/runs/r1/tasks/",
        "dags/etl/runs/r1/task/a",
        "dags/etl/runs/r1/tasks/a/b",
    ],
)
def test_bad_task_name(name: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_task_name(name)
    assert info.value.field == "name"
    assert "is not a task name" in info.value.problem
