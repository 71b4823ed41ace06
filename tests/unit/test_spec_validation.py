"""validate_spec: every rule, with the field path it names."""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Callable, Mapping
from typing import Any

import pytest
from google.protobuf.duration_pb2 import Duration
from hypothesis import given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument, ScheddError, quote
from schedd_core.identifiers import check_id
from schedd_core.spec import validate_spec
from tests.unit.helpers import dag, dag_specs, task


def rejects(
    spec: pb.DagSpec, field: str, problem: str = "", *, known_pools: Mapping[str, int] | None = None
) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as info:
        validate_spec(spec, known_pools=known_pools)
    assert info.value.field == field, str(info.value)
    assert problem in info.value.problem
    assert str(info.value) == f"{info.value.field}: {info.value.problem}"
    return info.value


def chain(n: int) -> list[pb.TaskSpec]:
    return [task(f"t{i}", *([f"t{i - 1}"] if i else [])) for i in range(n)]


def test_a_full_featured_spec_is_accepted() -> None:
    spec = dag(
        task("extract", retries=3, retry_delay=Duration(seconds=5), max_retry_delay=Duration(seconds=60)),
        task(
            "load",
            "extract",
            python=pb.PythonCallable(target="etl.load:run"),
            execution_timeout=Duration(seconds=30),
            priority_weight=5,
            pool="db",
            pool_slots=2,
            queue="io-bound.v2",
            trigger_rule=pb.TRIGGER_RULE_ALL_DONE,
            env={"DB_URL": "x", "_private": "y", "A1": ""},
        ),
        dag_id="Nightly_ETL-v1.2",
        max_active_runs=1,
        max_active_tasks=4,
        tags=["etl", "nightly"],
    )
    validate_spec(spec, known_pools={"db": 4, "default_pool": 128})


def test_invalid_argument_is_a_schedd_error() -> None:
    err = rejects(dag(), "spec.tasks")
    assert isinstance(err, ScheddError)


# --- the DAG itself -------------------------------------------------------------------------------


def test_empty_dag() -> None:
    rejects(dag(), "spec.tasks", "at least one task")


@pytest.mark.parametrize(
    ("dag_id", "problem"),
    [
        ("", "must not be empty"),
        ("team/etl", "not a valid id"),
        ("a b", "not a valid id"),
        ("-leading-dash", "not a valid id"),
        (".hidden", "not a valid id"),
        ("_under", "not a valid id"),
        ("caf\u00e9", "not a valid id"),
        ("x" * 251, "not a valid id"),
        ("a\tb", "not a valid id"),
        ("a\nb", "not a valid id"),
        ("\nab", "not a valid id"),
        ("a\rb", "not a valid id"),
        ("a\x00", "not a valid id"),
        ("a\x1b[31m", "not a valid id"),
        ("a\x7f", "not a valid id"),
    ],
)
def test_bad_dag_id(dag_id: str, problem: str) -> None:
    err = rejects(dag(task("a"), dag_id=dag_id), "spec.dag_id", problem)
    if dag_id:
        assert quote(dag_id) in err.problem


@pytest.mark.parametrize("dag_id", ["a", "0", "A.b-c_d", "x" * 250])
def test_good_dag_id(dag_id: str) -> None:
    validate_spec(dag(task("a"), dag_id=dag_id))


@pytest.mark.parametrize("dag_id", ["etl\n", "x" * 250 + "\n"])
def test_dag_id_with_trailing_newline_is_rejected(dag_id: str) -> None:
    rejects(dag(task("a"), dag_id=dag_id), "spec.dag_id", "not a valid id")


def test_task_id_with_trailing_newline_is_rejected() -> None:
    # Accepted today, which makes "a" and "a\n" two different tasks of one DAG.
    rejects(dag(task("a"), task("a\n", "a")), "spec.tasks[1].task_id", "not a valid id")


@pytest.mark.parametrize(("field", "value"), [("max_active_runs", -1), ("max_active_tasks", -1)])
def test_negative_dag_limits(field: str, value: int) -> None:
    spec = dag(task("a"))
    setattr(spec, field, value)
    rejects(spec, f"spec.{field}", "must not be negative")


def test_zero_dag_limits_are_accepted() -> None:
    validate_spec(dag(task("a"), max_active_runs=0, max_active_tasks=0))


# --- task ids and edges ---------------------------------------------------------------------------


def test_duplicate_task_id() -> None:
    err = rejects(dag(task("a"), task("b"), task("a")), "spec.tasks[2].task_id", "duplicate task id 'a'")
    assert "tasks[0]" in err.problem


@pytest.mark.parametrize("task_id", ["", "a/b", "a b", "-a"])
def test_bad_task_id(task_id: str) -> None:
    rejects(dag(task("ok"), task(task_id)), "spec.tasks[1].task_id")


def test_unknown_upstream() -> None:
    err = rejects(dag(task("a"), task("b", "a", "nope")), "spec.tasks[1].upstream[1]", "unknown task id")
    assert "'nope'" in err.problem


def test_upstream_may_come_later_in_the_list() -> None:
    validate_spec(dag(task("b", "a"), task("a")))


def test_self_dependency() -> None:
    rejects(dag(task("a"), task("b", "b")), "spec.tasks[1].upstream[0]", "cannot depend on itself")


def _cycle_in(problem: str) -> list[str]:
    assert problem.startswith("cycle: "), problem
    return problem.removeprefix("cycle: ").split(" -> ")


def _assert_is_cycle(path: list[str], spec: pb.DagSpec) -> None:
    """``path`` is closed and each arrow goes from an upstream task to one of its downstream tasks."""
    ups = {t.task_id: set(t.upstream) for t in spec.tasks}
    assert len(path) >= 3
    assert path[0] == path[-1], path
    assert len(set(path[:-1])) == len(path) - 1, path
    for src, dst in itertools.pairwise(path):
        assert src in ups[dst], f"{src} -> {dst} is not an edge; path {path}"


def test_two_task_cycle_is_printed() -> None:
    spec = dag(task("a", "b"), task("b", "a"))
    path = _cycle_in(rejects(spec, "spec.tasks", "cycle: ").problem)
    assert sorted(path[:-1]) == ["a", "b"]
    _assert_is_cycle(path, spec)


def test_three_task_cycle_is_printed_in_edge_direction() -> None:
    # Edges: a -> b -> c -> a (b depends on a, ...), plus an innocent root x feeding a.
    spec = dag(task("x"), task("a", "c", "x"), task("b", "a"), task("c", "b"))
    err = rejects(spec, "spec.tasks", "cycle: ")
    path = _cycle_in(err.problem)
    assert " -> ".join(path) in {"a -> b -> c -> a", "b -> c -> a -> b", "c -> a -> b -> c"}
    _assert_is_cycle(path, spec)


# --- actions --------------------------------------------------------------------------------------


def test_no_action() -> None:
    rejects(dag(task("a"), pb.TaskSpec(task_id="b")), "spec.tasks[1]", "needs an action")


@pytest.mark.parametrize("command", ["", "   ", "\n\t"])
def test_empty_command(command: str) -> None:
    rejects(dag(task("a", shell=pb.ShellCommand(command=command))), "spec.tasks[0].shell.command", "empty")


def test_command_limit_counts_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("schedd_core.spec.MAX_COMMAND_BYTES", 10)
    validate_spec(dag(task("a", shell=pb.ShellCommand(command="x" * 10))))
    validate_spec(dag(task("a", shell=pb.ShellCommand(command="\u00e9" * 5))))  # 10 bytes
    rejects(dag(task("a", shell=pb.ShellCommand(command="x" * 11))), "spec.tasks[0].shell.command", "longer")
    rejects(
        dag(task("a", shell=pb.ShellCommand(command="\u00e9" * 6))),  # 6 characters, 12 bytes
        "spec.tasks[0].shell.command",
        "longer than 10 bytes",
    )


@pytest.mark.parametrize(
    "target",
    [
        "",
        "module",
        "module:",
        ":func",
        "1pkg.mod:func",
        "pkg.mod:1func",
        "pkg-x.mod:f",
        "pkg.mod:f-g",
        "a:b:c",
        " a:b",
    ],
)
def test_bad_python_target(target: str) -> None:
    spec = dag(task("a"), task("b", python=pb.PythonCallable(target=target)))
    rejects(spec, "spec.tasks[1].python.target", "package.module:function")


@pytest.mark.parametrize("target", ["pkg.mod:func", "mod:Class.method", "_m:_f", "a:b"])
def test_good_python_target(target: str) -> None:
    validate_spec(dag(task("a", python=pb.PythonCallable(target=target))))


def test_python_target_with_trailing_newline_is_rejected() -> None:
    spec = dag(task("a", python=pb.PythonCallable(target="pkg.mod:func\n")))
    rejects(spec, "spec.tasks[0].python.target")


# --- numeric options ------------------------------------------------------------------------------

OptionCase = tuple[str, Callable[[], pb.TaskSpec], str]

NUMERIC: list[OptionCase] = [
    ("negative retries", lambda: task("a", retries=-1), "retries"),
    ("negative retry_delay", lambda: task("a", retry_delay=Duration(seconds=-1)), "retry_delay"),
    ("negative retry_delay nanos", lambda: task("a", retry_delay=Duration(nanos=-1)), "retry_delay"),
    ("negative max_retry_delay", lambda: task("a", max_retry_delay=Duration(seconds=-5)), "max_retry_delay"),
    ("zero execution_timeout", lambda: task("a", execution_timeout=Duration()), "execution_timeout"),
    (
        "negative execution_timeout",
        lambda: task("a", execution_timeout=Duration(seconds=-3)),
        "execution_timeout",
    ),
    ("negative pool_slots", lambda: task("a", pool_slots=-1), "pool_slots"),
]


@pytest.mark.parametrize(("name", "make", "field"), NUMERIC, ids=[c[0] for c in NUMERIC])
def test_bad_numeric_option(name: str, make: Callable[[], pb.TaskSpec], field: str) -> None:
    err = rejects(dag(task("ok"), make()), f"spec.tasks[1].{field}")
    assert "negative" in err.problem or "positive" in err.problem, name


def test_boundary_numeric_options_are_accepted() -> None:
    validate_spec(
        dag(
            task(
                "a",
                retries=0,
                retry_delay=Duration(),
                max_retry_delay=Duration(),
                execution_timeout=Duration(seconds=1),
                pool_slots=0,
            )
        )
    )


def test_unset_execution_timeout_is_accepted() -> None:
    t = task("a")
    assert not t.HasField("execution_timeout")
    validate_spec(dag(t))


# --- pools, queues, env ---------------------------------------------------------------------------


def test_unknown_pool_when_known_pools_given() -> None:
    spec = dag(task("a", pool="db"), task("b", pool="gpu"))
    err = rejects(spec, "spec.tasks[1].pool", "unknown pool", known_pools={"db": 2})
    assert "'gpu'" in err.problem
    rejects(spec, "spec.tasks[0].pool", "unknown pool", known_pools={})


def test_any_pool_when_known_pools_not_given() -> None:
    validate_spec(dag(task("a", pool="anything")))


def test_a_task_needing_more_slots_than_its_pool_has_is_rejected() -> None:
    pools = {"db": 2, "default_pool": 128}
    validate_spec(dag(task("a", pool="db", pool_slots=2)), known_pools=pools)
    rejects(
        dag(task("a", pool="db", pool_slots=3)),
        "spec.tasks[0].pool_slots",
        "pool 'db' has 2",
        known_pools=pools,
    )
    rejects(
        dag(task("a", pool_slots=200)),
        "spec.tasks[0].pool_slots",
        "'default_pool' has 128",
        known_pools=pools,
    )


@pytest.mark.parametrize(
    ("field", "value", "where"),
    [
        ("retries", 2147483647, "retries"),
        ("retries", 1001, "retries"),
        ("priority_weight", 2**31 - 1, "priority_weight"),
        ("priority_weight", -100_001, "priority_weight"),
        ("max_active_instances", 2_000_000, "max_active_instances"),
        ("pool_slots", 2_000_000, "pool_slots"),
    ],
)
def test_numeric_task_options_are_bounded(field: str, value: int, where: str) -> None:
    rejects(dag(task("a", **{field: value})), f"spec.tasks[0].{where}", "must be between")


@pytest.mark.parametrize("field", ["max_active_runs", "max_active_tasks"])
def test_numeric_dag_options_are_bounded(field: str) -> None:
    options: dict[str, Any] = {field: 2**31 - 1}
    rejects(dag(task("a"), **options), f"spec.{field}", "must be between")
    options[field] = -1
    rejects(dag(task("a"), **options), f"spec.{field}", "must not be negative")


def test_durations_are_bounded() -> None:
    from google.protobuf.duration_pb2 import Duration

    rejects(dag(task("a"), dagrun_timeout=Duration(seconds=-5)), "spec.dagrun_timeout", "must be positive")
    rejects(dag(task("a"), dagrun_timeout=Duration(seconds=0)), "spec.dagrun_timeout", "must be positive")
    rejects(
        dag(task("a", retry_delay=Duration(seconds=10**9))), "spec.tasks[0].retry_delay", "at most 366 days"
    )
    rejects(
        dag(task("a", execution_timeout=Duration(seconds=40_000_000))),
        "spec.tasks[0].execution_timeout",
        "at most 366 days",
    )
    validate_spec(dag(task("a", retry_delay=Duration(seconds=3600)), dagrun_timeout=Duration(seconds=60)))


def test_sizes_and_callbacks_are_bounded() -> None:
    from google.protobuf.struct_pb2 import Struct

    big = Struct()
    big.update({"blob": "x" * 70_000})
    rejects(dag(task("a", params=big)), "spec.tasks[0].params", "the limit is")
    rejects(dag(task("a"), params=big), "spec.params", "the limit is")
    rejects(dag(task("a", env={"X": "y" * 70_000})), "spec.tasks[0].env", "the limit is")
    rejects(dag(task("a"), description="d" * 10_001), "spec.description", "longer than")
    rejects(dag(task("a"), tags=[""]), "spec.tags[0]", "1 to 100")
    bad_hook = pb.Callback(webhook_url="ftp://example.invalid/x")
    rejects(dag(task("a", on_failure=[bad_hook])), "spec.tasks[0].on_failure[0].webhook_url", "http")
    rejects(dag(task("a", on_success=[pb.Callback()])), "spec.tasks[0].on_success[0]", "needs a target")


def test_bad_pool_id() -> None:
    rejects(dag(task("a", pool="bad pool")), "spec.tasks[0].pool", "not a valid id")


def test_bad_queue_id() -> None:
    rejects(dag(task("a"), task("b", queue="q/1")), "spec.tasks[1].queue", "not a valid id")


@pytest.mark.parametrize("name", ["1ABC", "A-B", "A B", "A=B", "", "\u00c4"])
def test_bad_env_var_name(name: str) -> None:
    err = rejects(dag(task("a", env={"OK": "1", name: "x"})), "spec.tasks[0].env")
    assert repr(name) in err.problem


def test_env_var_name_with_trailing_newline_is_rejected() -> None:
    rejects(dag(task("a", env={"PATH\n": "x"})), "spec.tasks[0].env")


# --- size limits ----------------------------------------------------------------------------------


def test_too_many_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("schedd_core.spec.MAX_TASKS", 3)
    validate_spec(dag(task("a"), task("b"), task("c")))
    rejects(dag(task("a"), task("b"), task("c"), task("d")), "spec.tasks", "has 4 tasks; the limit is 3")


def test_too_deep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("schedd_core.spec.MAX_DEPTH", 5)
    validate_spec(dag(*chain(5)))
    validate_spec(dag(*(task(f"t{i}") for i in range(20))))  # wide is fine
    rejects(dag(*chain(6)), "spec.tasks", "dependency chain of 6 tasks; the limit is 5")


def test_depth_counts_the_longest_path_not_the_first_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("schedd_core.spec.MAX_DEPTH", 3)
    # end has a short path (root -> end) and a long one (root -> m1 -> m2 -> end).
    spec = dag(task("root"), task("end", "root", "m2"), task("m1", "root"), task("m2", "m1"))
    rejects(spec, "spec.tasks", "dependency chain of 4 tasks")


def test_spec_too_big(monkeypatch: pytest.MonkeyPatch) -> None:
    spec = dag(task("a", shell=pb.ShellCommand(command="x" * 200)))
    monkeypatch.setattr("schedd_core.spec.MAX_SPEC_BYTES", spec.ByteSize())
    validate_spec(spec)
    monkeypatch.setattr("schedd_core.spec.MAX_SPEC_BYTES", spec.ByteSize() - 1)
    rejects(spec, "spec", "bytes; the limit is")


# --- properties -----------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(dag_specs(max_tasks=15, trigger_rules=True))
def test_random_acyclic_dags_are_accepted(spec: pb.DagSpec) -> None:
    validate_spec(spec)


@settings(max_examples=100, deadline=None)
@given(dag_specs(max_tasks=10), st.data())
def test_a_back_edge_is_reported_as_a_real_cycle(spec: pb.DagSpec, data: st.DataObject) -> None:
    n = len(spec.tasks)
    if n < 2:
        spec.tasks.append(task(f"t{n}"))
        n += 1
    i = data.draw(st.integers(0, n - 2), label="i")
    j = data.draw(st.integers(i + 1, n - 1), label="j")
    by_id = {t.task_id: t for t in spec.tasks}
    if f"t{i}" not in by_id[f"t{j}"].upstream:
        by_id[f"t{j}"].upstream.append(f"t{i}")
    by_id[f"t{i}"].upstream.append(f"t{j}")  # closes t{i} -> t{j} -> t{i}, or a longer loop
    err = rejects(spec, "spec.tasks", "cycle: ")
    _assert_is_cycle(_cycle_in(err.problem), spec)


ID_FIRST = string.ascii_letters + string.digits
ID_REST = ID_FIRST + "_.-"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=ID_REST + "/ \t\x00\x7f\u00e9:", max_size=260))
def test_check_id_accepts_exactly_the_documented_alphabet(value: str) -> None:
    # Trailing newlines are left to test_dag_id_with_trailing_newline_is_rejected (a known bug).
    valid = 1 <= len(value) <= 250 and value[0] in ID_FIRST and all(c in ID_REST for c in value)
    try:
        check_id("f", value)
    except InvalidArgument as err:
        assert not valid, f"{value!r} rejected: {err}"
        assert err.field == "f"
    else:
        assert valid, f"{value!r} accepted"
        assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.\-]*", value)
