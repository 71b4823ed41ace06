"""One limit, one answer: the components that check the same limit (``schedd_core.limits``) accept
a value exactly at it and refuse one byte more, all in the same unit."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from typing import Any

import pytest
import typer

from schedctl.local_inputs import cluster_conf
from schedctl.runs import parse_conf
from schedd.v1 import resources_pb2 as pb
from schedd_api import runs as api_runs
from schedd_core.clock import FakeClock
from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_CONF_BYTES, MAX_RESULT_BYTES
from schedd_exec.python_child import Child
from schedd_registry.results import result_problem
from schedd_rpc import convert


def _conf_of(size: int) -> dict[str, Any]:
    """A conf that takes exactly ``size`` bytes as the api receives it (a serialized Struct)."""
    blob = size - convert.struct({"blob": ""}).ByteSize()
    while (found := convert.struct({"blob": "x" * blob}).ByteSize()) > size:
        blob -= found - size
    conf = {"blob": "x" * blob}
    assert convert.struct(conf).ByteSize() == size
    return conf


class _PastTheSizeCheck(Exception):
    """Raised where the api would read the DAG: the conf's size was accepted."""


def _api_trigger(conf: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    async def get_dag(*_args: object) -> None:
        raise _PastTheSizeCheck

    monkeypatch.setattr("schedd_store.dags.get_dag", get_dag)
    asyncio.run(
        api_runs.trigger(
            None,  # type: ignore[arg-type]  # never reached: refused or stopped before the store
            FakeClock(),
            dag_id="d",
            run_id="",
            logical_date=None,
            conf=conf,
            conf_bytes=convert.struct(conf).ByteSize(),
            request=None,
        )
    )


REFUSAL = f"conf: is {MAX_CONF_BYTES + 1} bytes; the limit is {MAX_CONF_BYTES}"


def test_the_api_takes_a_conf_at_the_limit_and_refuses_one_byte_more(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(_PastTheSizeCheck):
        _api_trigger(_conf_of(MAX_CONF_BYTES), monkeypatch)
    with pytest.raises(InvalidArgument) as refused:
        _api_trigger(_conf_of(MAX_CONF_BYTES + 1), monkeypatch)
    assert str(refused.value) == REFUSAL


def test_schedctl_runs_trigger_refuses_at_the_same_size(capsys: pytest.CaptureFixture[str]) -> None:
    at_limit = _conf_of(MAX_CONF_BYTES)
    assert parse_conf(json.dumps(at_limit)) == at_limit
    # Whitespace in the text does not count: the limit is the api's, on what is sent.
    assert parse_conf(json.dumps(at_limit, indent=8) + " " * 10_000) == at_limit
    with pytest.raises(typer.Exit) as refused:
        parse_conf(json.dumps(_conf_of(MAX_CONF_BYTES + 1)))
    assert refused.value.exit_code == 2
    assert f"--{REFUSAL}" in " ".join(capsys.readouterr().err.split())


def test_schedctl_dags_test_refuses_at_the_same_size() -> None:
    spec = pb.DagSpec(dag_id="d", allow_undeclared_conf=True)
    at_limit = _conf_of(MAX_CONF_BYTES)
    assert cluster_conf(spec, at_limit) == at_limit
    with pytest.raises(InvalidArgument) as refused:
        cluster_conf(spec, _conf_of(MAX_CONF_BYTES + 1))
    assert str(refused.value) == REFUSAL


@pytest.fixture
def child() -> Iterator[Child]:
    """A Python child of the worker's pool, built on a pipe it never reads: only its result check runs."""
    read_fd, write_fd = os.pipe()
    made = Child(read_fd, write_fd, MAX_RESULT_BYTES)
    yield made
    made._requests.close()  # owns the read end
    os.close(write_fd)


def test_the_worker_and_the_registry_take_a_result_at_the_limit(child: Child) -> None:
    at_limit = "x" * (MAX_RESULT_BYTES - 2)  # its JSON has two quotes more
    reply = child._encode_result(at_limit)
    assert reply["ok"] and len(reply["result"].encode()) == MAX_RESULT_BYTES
    assert result_problem(reply["result"]) == ""


def test_the_worker_and_the_registry_refuse_a_result_one_byte_over(child: Child) -> None:
    over = "x" * (MAX_RESULT_BYTES - 1)
    reply = child._encode_result(over)
    assert not reply["ok"] and f"{MAX_RESULT_BYTES + 1} bytes" in reply["error"]
    assert f"{MAX_RESULT_BYTES + 1} bytes" in result_problem(json.dumps(over))
