"""Odd files and values given to schedctl: exit code 2 and a clear message, never a traceback or a
hang, and nothing is sent to the api (the address given here has nobody listening)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schedd_devstack.ports import free_port
from tests.fixtures.services import schedctl

pytestmark = pytest.mark.e2e

NOWHERE = f"127.0.0.1:{free_port()}"


def rejected(*args: str, expect: str) -> None:
    result = schedctl(NOWHERE, *args, timeout=30)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert expect in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


def test_a_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "dag.yaml"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    rejected("dags", "register", str(path), expect="binary file")


def test_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "dag.yaml"
    path.write_bytes(b"dag_id: \xff\xfe\n")
    rejected("dags", "register", str(path), expect="not UTF-8")


def test_dev_zero() -> None:
    rejected("dags", "register", "/dev/zero", expect="not a regular file")


def test_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "dag.yaml"
    os.mkfifo(fifo)
    rejected("dags", "register", str(fifo), expect="not a regular file")


def test_a_directory_without_dag_files(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a DAG")
    rejected("dags", "register", str(tmp_path), expect="no DAG files")


def test_a_python_file_that_is_a_fifo(tmp_path: Path) -> None:
    fifo = tmp_path / "dag.py"
    os.mkfifo(fifo)
    rejected("dags", "register", str(fifo), expect="not a regular file")


def test_an_oversized_file(tmp_path: Path) -> None:
    path = tmp_path / "dag.yaml"
    with path.open("wb") as f:
        f.truncate(5 * 1024 * 1024)  # sparse: holes read as NUL bytes, but the size is checked first
    rejected("dags", "register", str(path), expect="at most")


def test_a_yaml_alias_bomb(tmp_path: Path) -> None:
    lines = ['a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [
        f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]" for i in range(8)
    ]
    path = tmp_path / "bomb.yaml"
    path.write_text("\n".join(lines) + "\n")
    rejected("dags", "register", str(path), expect="aliases")


def test_deeply_nested_yaml(tmp_path: Path) -> None:
    path = tmp_path / "deep.yaml"
    path.write_text("dag_id: d\ntasks: " + "[" * 5000 + "]" * 5000 + "\n")
    rejected("dags", "register", str(path), expect="nested too deeply")


@pytest.mark.parametrize(
    ("conf", "expect"),
    [
        ('{"blob": "' + "x" * 70_000 + '"}', "bytes; the limit is 65536"),
        ("[" * 100_000, "nested deeper than 32"),
        ('{"a": ' * 40 + "1" + "}" * 40, "nested deeper than 32"),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_conf(conf: str, expect: str) -> None:
    rejected("runs", "trigger", "any", "--conf", conf, expect=expect)
