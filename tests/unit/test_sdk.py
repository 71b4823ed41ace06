"""schedd_sdk: options to spec fields, edges, TaskFlow, callbacks, validation, the loader, examples."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format

from schedctl.specfile import SpecFileError, load_spec, load_specs
from schedd.v1 import resources_pb2 as pb
from schedd_core.version_identity import version_hash
from schedd_sdk import (
    DAG,
    Callback,
    DagDefinitionError,
    DagLoadError,
    DagValidationError,
    Task,
    TriggerRule,
    WeightRule,
    chain,
    dag,
    shell,
    task,
    upstream_results,
)
from schedd_sdk.loader import load_dags
from tests.unit.sdk_examples import tasks as t

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SDK_EXAMPLES = Path(__file__).resolve().parent / "sdk_examples"
TASKS = "tests.unit.sdk_examples.tasks"


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    """Module names are derived relative to the current directory, as when run from the repo root."""
    monkeypatch.chdir(REPO)


def by_id(spec: pb.DagSpec) -> dict[str, pb.TaskSpec]:
    return {task_spec.task_id: task_spec for task_spec in spec.tasks}


def upstream(spec: pb.DagSpec) -> dict[str, list[str]]:
    return {task_spec.task_id: list(task_spec.upstream) for task_spec in spec.tasks}


# --- options ---------------------------------------------------------------------------------------


def test_every_task_option_maps_to_its_spec_field() -> None:
    with DAG("options") as d:
        t.extract.override(
            task_id="full",
            retries=4,
            retry_delay=timedelta(seconds=7),
            retry_exponential_backoff=True,
            max_retry_delay=90,
            execution_timeout=1.5,
            priority_weight=5,
            weight_rule="upstream",
            pool="db",
            pool_slots=3,
            queue="gpu",
            trigger_rule=TriggerRule.ALL_DONE,
            params={"n": 2, "names": ["a"], "nested": {"ok": True}},
            env={"MODE": "fast"},
            max_active_instances=2,
            on_failure=Callback.python("pkg.alerts:page"),
            on_retry=[Callback.webhook("https://hooks.example.com/retry")],
            on_success=t.notify,
        )()
    (spec,) = d.to_spec().tasks
    assert spec.task_id == "full"
    assert spec.python.target == f"{TASKS}:extract"
    assert spec.retries == 4
    assert spec.retry_delay.ToTimedelta() == timedelta(seconds=7)
    assert spec.retry_exponential_backoff is True
    assert spec.max_retry_delay.ToTimedelta() == timedelta(seconds=90)
    assert spec.execution_timeout.ToTimedelta() == timedelta(seconds=1.5)
    assert spec.priority_weight == 5
    assert spec.weight_rule == pb.WEIGHT_RULE_UPSTREAM
    assert spec.pool == "db"
    assert spec.pool_slots == 3
    assert spec.queue == "gpu"
    assert spec.trigger_rule == pb.TRIGGER_RULE_ALL_DONE
    assert json_format.MessageToDict(spec.params) == {"n": 2, "names": ["a"], "nested": {"ok": True}}
    assert dict(spec.env) == {"MODE": "fast"}
    assert spec.max_active_instances == 2
    assert [c.python.target for c in spec.on_failure] == ["pkg.alerts:page"]
    assert [c.webhook_url for c in spec.on_retry] == ["https://hooks.example.com/retry"]
    assert [c.python.target for c in spec.on_success] == [f"{TASKS}:notify"]
    assert spec.branch is False


def test_defaults_are_unset_fields_so_the_hash_matches_a_yaml_spec() -> None:
    with DAG("defaults", timezone="UTC") as d:
        t.extract.override(
            priority_weight=1, pool_slots=1, weight_rule="downstream", trigger_rule="all_success"
        )()
        shell("echo hi", task_id="hi")
    spec = d.to_spec()
    extract, hi = spec.tasks
    for task_spec in (extract, hi):
        assert task_spec.priority_weight == 0 and task_spec.pool_slots == 0
        assert task_spec.weight_rule == pb.WEIGHT_RULE_UNSPECIFIED
        assert task_spec.trigger_rule == pb.TRIGGER_RULE_UNSPECIFIED
        assert not task_spec.HasField("retry_delay")  # the server's default (300 s) applies
        assert not task_spec.HasField("execution_timeout") and not task_spec.HasField("params")
    assert hi.shell.command == "echo hi"
    assert spec.timezone == "" and not spec.HasField("start_date")
    yaml_like = json_format.ParseDict(
        {
            "dag_id": "defaults",
            "tasks": [
                {"task_id": "extract", "python": {"target": f"{TASKS}:extract"}},
                {"task_id": "hi", "shell": {"command": "echo hi"}},
            ],
        },
        pb.DagSpec(),
    )
    assert version_hash(spec) == version_hash(yaml_like)


def test_an_explicit_zero_retry_delay_is_set() -> None:
    with DAG("zero") as d:
        shell("true", task_id="a", retry_delay=0)
    (spec,) = d.to_spec().tasks
    assert spec.HasField("retry_delay") and spec.retry_delay.ToTimedelta() == timedelta(0)


def test_every_dag_option_maps_to_its_spec_field() -> None:
    with DAG(
        "dag_options",
        description="All of them.",
        schedule="0 3 * * *",
        timezone="Europe/Berlin",
        start_date=datetime(2024, 6, 1, 12, 0),
        catchup=True,
        max_active_runs=2,
        max_active_tasks=16,
        dagrun_timeout=timedelta(minutes=30),
        tags=["b", "a", "b"],
        params={"env": "prod"},
        on_failure=[t.notify, Callback.webhook("http://alerts.local/fail")],
        on_success=Callback.python(t.notify),
    ) as d:
        shell("true", task_id="a")
    spec = d.to_spec()
    assert spec.dag_id == "dag_options" and spec.description == "All of them."
    assert spec.schedule == "0 3 * * *" and spec.timezone == "Europe/Berlin"
    # A naive start date is read in the DAG's time zone (CEST is UTC+2 in June).
    assert spec.start_date.ToDatetime(tzinfo=UTC) == datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    assert spec.catchup is True and spec.max_active_runs == 2 and spec.max_active_tasks == 16
    assert spec.dagrun_timeout.ToTimedelta() == timedelta(minutes=30)
    assert list(spec.tags) == ["b", "a"]
    assert json_format.MessageToDict(spec.params) == {"env": "prod"}
    assert [c.WhichOneof("target") for c in spec.on_failure] == ["python", "webhook_url"]
    assert spec.on_failure[0].python.target == f"{TASKS}:notify"
    assert spec.on_success[0].python.target == f"{TASKS}:notify"


def test_start_date_forms() -> None:
    aware = datetime(2024, 1, 1, 5, tzinfo=UTC)
    assert DAG("a", start_date=aware).start_date == aware
    assert DAG("b", start_date=date(2024, 1, 2)).start_date == datetime(2024, 1, 2, tzinfo=UTC)
    with pytest.raises(DagDefinitionError, match="start_date must be a datetime"):
        DAG("c", start_date="2024-01-01")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"retries": "3"}, "option retries must be an int"),
        ({"retries": True}, "option retries must be an int"),
        ({"retry_delay": "5m"}, "option retry_delay must be a timedelta or a number of seconds"),
        ({"retry_delay": float("nan")}, "option retry_delay must be a timedelta"),
        ({"trigger_rule": "sometimes"}, "option trigger_rule must be one of 'all_success'"),
        ({"weight_rule": "sideways"}, "option weight_rule must be one of 'downstream'"),
        ({"env": {"N": 1}}, "environment values are strings"),
        ({"params": {"when": datetime(2024, 1, 1)}}, "must hold JSON values"),
        ({"on_failure": "pkg.mod:func"}, "Callback.python"),
        ({"on_failure": 42}, "expected a Callback or a function"),
        ({"owner": "me"}, "unknown option 'owner'"),
    ],
)
def test_bad_options_are_rejected_where_they_are_given(options: dict[str, Any], message: str) -> None:
    with pytest.raises(DagDefinitionError, match=message):
        task(**options)(t.plain)
    with DAG("bad"), pytest.raises(DagDefinitionError, match=message):
        shell("true", task_id="x", **options)


def test_rules_accept_enums_and_names() -> None:
    with DAG("rules") as d:
        shell("true", task_id="a", trigger_rule="ONE_FAILED", weight_rule=WeightRule.ABSOLUTE)
        shell(
            "true", task_id="b", trigger_rule=TriggerRule.NONE_FAILED_MIN_ONE_SUCCESS, weight_rule="upstream"
        )
    a, b = d.to_spec().tasks
    assert (a.trigger_rule, a.weight_rule) == (pb.TRIGGER_RULE_ONE_FAILED, pb.WEIGHT_RULE_ABSOLUTE)
    assert (b.trigger_rule, b.weight_rule) == (
        pb.TRIGGER_RULE_NONE_FAILED_MIN_ONE_SUCCESS,
        pb.WEIGHT_RULE_UPSTREAM,
    )


def test_bad_dag_settings_are_rejected() -> None:
    with pytest.raises(DagDefinitionError, match="not a valid id"):
        DAG("no spaces")
    with pytest.raises(DagDefinitionError, match="dagrun_timeout must be positive"):
        DAG("x", dagrun_timeout=0)
    with pytest.raises(DagDefinitionError, match="tags must be an iterable of strings"):
        DAG("x", tags="abc")
    with pytest.raises(DagDefinitionError, match="not an IANA time zone"):
        DAG("x", timezone="Mars/Olympus")
    with pytest.raises(DagDefinitionError, match="option max_active_runs must be an int"):
        DAG("x", max_active_runs=1.5)  # type: ignore[arg-type]


# --- edges -------------------------------------------------------------------------------------------


def test_edges_in_every_form() -> None:
    with DAG("edges") as d:
        a, b, c, e, f, g, h = (shell("true", task_id=name) for name in "abcefgh")
        assert (a >> b) is b
        assert (c << b) is b  # b >> c
        assert (a >> [e, f]) == [e, f]
        assert ([e, f] >> g) is g
        assert ([g] << h) is h  # h >> g
        b >> c >> h  # a chain; b >> c again adds nothing
    assert upstream(d.to_spec()) == {
        "a": [],
        "b": ["a"],
        "c": ["b"],
        "e": ["a"],
        "f": ["a"],
        "g": ["e", "f", "h"],
        "h": ["c"],
    }
    assert g.upstream_ids == ("e", "f", "h") and h.downstream_ids == ("g",)


def test_edge_methods_and_chain() -> None:
    with DAG("chained") as d:
        a, b, c, x, y, z, w = (shell("true", task_id=name) for name in "abcxyzw")
        b.set_upstream(a)
        b.set_downstream([c])
        chain(c, [x, y], z)
        chain([x, y], [z, w])
    assert upstream(d.to_spec()) == {
        "a": [],
        "b": ["a"],
        "c": ["b"],
        "x": ["c"],
        "y": ["c"],
        "z": ["x", "y"],
        "w": ["y"],
    }
    with DAG("chain_bad"):
        p, q, r = (shell("true", task_id=name) for name in "pqr")
        with pytest.raises(DagDefinitionError, match="same length"):
            chain([p, q], [r])


def test_bad_edges_are_rejected() -> None:
    with DAG("one"):
        a = shell("true", task_id="a")
    with DAG("two"):
        b = shell("true", task_id="b")
        with pytest.raises(DagDefinitionError, match="edges connect tasks of one DAG"):
            a >> b
        with pytest.raises(DagDefinitionError, match="cannot depend on itself"):
            b >> b
        with pytest.raises(DagDefinitionError, match="needs a task or a list of tasks, got 'c'"):
            b >> "c"  # type: ignore[type-var]
        with pytest.raises(DagDefinitionError, match=r"call it, extract\(\), to get its task"):
            b >> t.extract  # type: ignore[type-var]


def test_taskflow_arguments_make_edges() -> None:
    with DAG("taskflow") as d:
        loaded = t.load(t.transform(t.extract()))
        assert isinstance(loaded, Task) and loaded.task_id == "load"
        e2, r = t.extract(), t.right()
        t.load(rows=[e2, r, {"also": loaded}])
    assert upstream(d.to_spec()) == {
        "extract": [],
        "transform": ["extract"],
        "load": ["transform"],
        "extract__1": [],
        "right": [],
        "load__1": ["extract__1", "right", "load"],
    }


def test_arguments_that_are_not_tasks_or_json_are_rejected_naming_the_task() -> None:
    with DAG("constants"):
        t.load(42)  # a JSON literal is an argument like any other
        with pytest.raises(DagDefinitionError, match=r"load\(\): argument 1 is <object object at"):
            t.load(object())
        with pytest.raises(DagDefinitionError, match=r"argument rows= has the key 1"):
            t.load(rows={1: t.extract()})
        with pytest.raises(DagDefinitionError, match=r"call it, extract\(\), to pass its result"):
            t.load(t.extract)


def test_branch_flag() -> None:
    with DAG("branchy") as d:
        t.pick() >> [t.left(), t.right()]
        t.pick_later()
    specs = by_id(d.to_spec())
    assert specs["pick"].branch and specs["pick_later"].branch
    assert specs["pick_later"].trigger_rule == pb.TRIGGER_RULE_ALL_DONE
    assert not specs["left"].branch


def test_calling_a_task_function_twice_gives_suffixed_ids() -> None:
    with DAG("dupes") as d:
        t.extract()
        t.extract()
        t.extract.override(task_id="extract")()
        t.extract.override(task_id="other")()
        t.extract.override(task_id="other")()
    assert d.task_ids == ("extract", "extract__1", "extract__2", "other", "other__1")
    with DAG("shell_dupes"):
        shell("true", task_id="a")
        with pytest.raises(DagDefinitionError, match="already has a task 'a'"):
            shell("true", task_id="a")


def test_nested_and_lambda_functions_are_rejected() -> None:
    def nested() -> None:
        pass

    with pytest.raises(
        DagDefinitionError, match=r"'test_nested_and_lambda_functions_are_rejected\.nested' is defined inside"
    ):
        task(nested)
    with pytest.raises(DagDefinitionError, match="is a lambda"):
        task(lambda: None)
    with pytest.raises(DagDefinitionError, match="defined inside another function"):
        task(on_failure=nested)(t.plain)


def test_a_call_must_fit_the_signature_less_what_workers_pass() -> None:
    needs_rows, takes_runtime = task(_needs_rows), task(_takes_runtime_arguments)
    with DAG("signatures"):
        with pytest.raises(
            DagDefinitionError, match=r"_needs_rows\(\): .*missing a required argument: 'rows'"
        ):
            needs_rows()
        needs_rows([1, 2])
        takes_runtime()  # params and context are what workers pass
        with pytest.raises(DagDefinitionError, match="params is passed by the worker"):
            takes_runtime(params={"a": 1})


def _needs_rows(rows: list[int]) -> None:
    pass


def _takes_runtime_arguments(params: dict[str, Any], *, context: dict[str, str], **extra: Any) -> None:
    pass


def test_a_shadowed_function_cannot_be_named_by_import_path(monkeypatch: pytest.MonkeyPatch) -> None:
    shadowed = task(_shadowed)
    monkeypatch.setattr(sys.modules[__name__], "_shadowed", None)  # the name no longer names the function
    with DAG("shadowed"), pytest.raises(DagDefinitionError, match="does not name it"):
        shadowed()


def _shadowed() -> None:
    pass


def test_outside_a_dag_a_task_function_is_the_function() -> None:
    assert t.extract() == [1, 2, 3]
    assert t.with_params(params={"a": 1}, context={"SCHEDD_TASK_ID": "x"}) == {
        "params": {"a": 1},
        "task": "x",
    }
    assert t.extract.function() == [1, 2, 3]
    assert t.extract.__name__ == "extract" and t.extract.__module__ == TASKS
    with pytest.raises(DagDefinitionError, match="outside a DAG definition"):
        shell("true", task_id="a")


def test_workers_resolve_targets_to_the_function() -> None:
    from schedd_exec.python_child import _Callable, resolve

    entry = _Callable(resolve(f"{TASKS}:with_params"))
    assert entry.wants_params and entry.wants_context
    assert entry.func(params={}, context={"SCHEDD_TASK_ID": "w"}) == {"params": {}, "task": "w"}
    plain = _Callable(resolve(f"{TASKS}:plain"))
    assert plain.wants_params and not plain.wants_context


def test_wrapping_a_plain_function_keeps_its_import_path() -> None:
    plain_task = task(pool="p1")(t.plain)
    with DAG("wrapped") as d:
        plain_task()
    (spec,) = d.to_spec().tasks
    assert (spec.task_id, spec.python.target, spec.pool) == ("plain", f"{TASKS}:plain", "p1")


# --- callbacks ---------------------------------------------------------------------------------------


def test_callbacks() -> None:
    assert Callback.python("a.b:c") == Callback("python", "a.b:c")
    assert Callback.python(t.notify).target == f"{TASKS}:notify"
    assert Callback.webhook("https://x.example/hook").to_proto() == pb.Callback(
        webhook_url="https://x.example/hook"
    )
    with pytest.raises(DagDefinitionError, match=r"must look like 'package\.module:function'"):
        Callback.python("no_colon")
    with pytest.raises(DagDefinitionError, match="is not an http"):
        Callback.webhook("ftp://x")
    with pytest.raises(DagDefinitionError, match="is not an http"):
        Callback.webhook("https://")


# --- default_args, context manager, @dag ----------------------------------------------------------------


def test_default_args_apply_unless_a_task_sets_the_option() -> None:
    with DAG(
        "defaults_args",
        default_args={"retries": 3, "pool": "shared", "queue": "q", "on_failure": [t.notify]},
    ) as d:
        shell("true", task_id="plain_shell")
        shell("true", task_id="own", retries=0, pool="mine")
        t.transform()  # @task(retries=2) wins over default_args
        t.extract.override(queue="other")()
    specs = by_id(d.to_spec())
    plain_shell = specs["plain_shell"]
    assert (plain_shell.retries, plain_shell.pool, plain_shell.queue) == (3, "shared", "q")
    assert (specs["own"].retries, specs["own"].pool) == (0, "mine")
    assert specs["transform"].retries == 2
    assert (specs["extract"].retries, specs["extract"].queue) == (3, "other")
    assert all(s.on_failure[0].python.target == f"{TASKS}:notify" for s in specs.values())
    with pytest.raises(DagDefinitionError, match="unknown option 'owner'"):
        DAG("x", default_args={"owner": "me"})
    with DAG("y", default_args={"depends_on_past": True}) as past:
        shell("true", task_id="waits")
        shell("true", task_id="free", depends_on_past=False)
    assert [(s.task_id, s.depends_on_past) for s in past.to_spec().tasks] == [
        ("waits", True),
        ("free", False),
    ]


def test_context_manager_form_and_nesting() -> None:
    with DAG("outer") as outer:
        a = shell("true", task_id="a")
        with DAG("inner") as inner:
            b = shell("true", task_id="b")
        c = shell("true", task_id="c")
    assert outer.task_ids == ("a", "c") and inner.task_ids == ("b",)
    assert a.dag is outer and b.dag is inner and c.dag is outer
    with outer:  # a DAG can be reopened
        shell("true", task_id="d")
    assert outer.get_task("d").dag is outer and "d" in outer


def test_dag_decorator() -> None:
    @dag
    def plain_dag() -> None:
        """Described by
        its docstring."""
        t.extract()

    built = plain_dag()
    assert built.dag_id == "plain_dag" and built.description == "Described by\nits docstring."
    assert plain_dag() is not built and plain_dag().to_spec() == built.to_spec()

    @dag(
        dag_id="custom",
        description="given",
        schedule="@hourly",
        start_date=date(2024, 1, 1),
        default_args={"retries": 5},
    )
    def other(n: int = 1) -> None:
        for _ in range(n):
            t.left()

    spec = other(n=2).to_spec()
    assert (spec.dag_id, spec.description, spec.schedule) == ("custom", "given", "@hourly")
    assert [(s.task_id, s.retries) for s in spec.tasks] == [("left", 5), ("left__1", 5)]
    with pytest.raises(DagDefinitionError, match="unknown option 'owner'"):
        dag(default_args={"owner": "me"})(dag_body_for_tests)


def dag_body_for_tests() -> None:
    pass


# --- validation ----------------------------------------------------------------------------------------


def test_a_cycle_is_reported_with_the_field() -> None:
    with DAG("cyclic") as d:
        a, b, c = (shell("true", task_id=name) for name in "abc")
        a >> b >> c >> a
    with pytest.raises(DagValidationError) as info:
        d.to_spec()
    assert info.value.field == "spec.tasks"
    assert "cycle:" in info.value.problem
    assert str(info.value).startswith("DAG 'cyclic': spec.tasks: cycle: ")
    assert d.to_spec(validate=False).dag_id == "cyclic"


def test_a_bad_option_value_is_reported_with_the_field_and_the_task() -> None:
    with DAG("negative") as d:
        shell("true", task_id="fine")
        shell("true", task_id="bad", retries=-1)
    with pytest.raises(DagValidationError) as info:
        d.to_spec()
    assert info.value.field == "spec.tasks[1].retries" and info.value.task_id == "bad"
    assert str(info.value) == "DAG 'negative': spec.tasks[1].retries (task 'bad'): must not be negative"
    with DAG("empty") as empty, pytest.raises(DagValidationError, match="needs at least one task"):
        empty.to_spec()
    with DAG("pool") as bad_pool:
        shell("true", task_id="x", pool="no such pool")
    with pytest.raises(DagValidationError, match=r"spec.tasks\[0\].pool \(task 'x'\)"):
        bad_pool.to_spec()


# --- runtime --------------------------------------------------------------------------------------------


def test_upstream_results(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCHEDD_UPSTREAM_RESULTS", raising=False)
    assert upstream_results() == {}
    monkeypatch.setenv("SCHEDD_UPSTREAM_RESULTS", json.dumps({"extract": [1, 2]}))
    assert upstream_results() == {"extract": [1, 2]}
    assert t.transform() == 3


# --- the loader -------------------------------------------------------------------------------------------


def test_loader_collects_every_dag_once() -> None:
    specs = load_dags(SDK_EXAMPLES / "multi.py")
    assert [s.dag_id for s in specs] == ["multi_with", "multi_decorated", "multi_called"]
    assert upstream(specs[1]) == {"hi": [], "extract": ["hi"]}
    assert specs[1].description == "Built by the loader."


def test_loader_restores_sys_path_and_sys_modules() -> None:
    path_before = list(sys.path)
    assert "tests.unit.sdk_examples.multi" not in sys.modules
    load_dags(SDK_EXAMPLES / "multi.py")
    assert sys.path == path_before
    assert "tests.unit.sdk_examples.multi" not in sys.modules


def test_loader_names_functions_of_the_dag_file_by_its_module_path() -> None:
    (spec,) = load_dags(SDK_EXAMPLES / "local_tasks.py")
    assert [s.python.target for s in spec.tasks] == [
        "tests.unit.sdk_examples.local_tasks:step",
        "tests.unit.sdk_examples.local_tasks:finish",
    ]
    from schedd_exec.python_child import resolve

    assert resolve("tests.unit.sdk_examples.local_tasks:step")() == "done"


def test_a_script_names_its_functions_by_its_path_from_the_current_directory() -> None:
    out = subprocess.run(
        [sys.executable, str(Path("tests/unit/sdk_examples/local_tasks.py"))],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    ).stdout
    targets = [x["python"]["target"] for x in json.loads(out)["tasks"]]
    assert targets == [
        "tests.unit.sdk_examples.local_tasks:step",
        "tests.unit.sdk_examples.local_tasks:finish",
    ]


def test_loader_errors() -> None:
    with pytest.raises(DagLoadError, match=r"no_dag.py: defines no DAG"):
        load_dags(SDK_EXAMPLES / "no_dag.py")
    with pytest.raises(DagLoadError) as info:
        load_dags(SDK_EXAMPLES / "broken.py")
    message = str(info.value)
    assert "broken.py: importing it raised KeyError: 'limit'" in message
    assert 'LIMIT = SETTINGS["limit"]' in message and "frozen importlib" not in message
    with pytest.raises(DagLoadError, match=r"two DAGs have the id 'same' \(first and second\(\)\)"):
        load_dags(SDK_EXAMPLES / "duplicate_ids.py")
    with pytest.raises(DagLoadError) as info:
        load_dags(SDK_EXAMPLES / "bad_task_call.py")
    assert "calling bad_task_call() raised DagDefinitionError: load(): argument 1 is <@task" in str(
        info.value
    )
    assert "load(extract)" in str(info.value)  # the user's line, not the SDK's frames
    with pytest.raises(DagLoadError, match=r"missing\.py: no such file"):
        load_dags(SDK_EXAMPLES / "missing.py")
    with pytest.raises(DagLoadError, match="a DAG file is a Python module"):
        load_dags(EXAMPLES / "diamond.yaml")


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, str]]:
    """An empty current directory with a uniquely named package directory in it."""
    package = "sdkpkg_" + tmp_path.name.replace("-", "_")
    (tmp_path / package).mkdir()
    monkeypatch.chdir(tmp_path)
    yield tmp_path, package
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".") or m == "helper"]:
        del sys.modules[name]


def test_a_dag_file_outside_any_import_root(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "shell_only.py").write_text(
        "from schedd_sdk import DAG, shell\nwith DAG('outside') as d:\n    shell('echo', task_id='a')\n"
    )
    (outside / "with-function.py").write_text(
        textwrap.dedent(
            """
            from schedd_sdk import dag, task

            @task
            def here() -> None: ...

            @dag
            def inside() -> None:
                here()
            """
        )
    )
    assert [s.dag_id for s in load_dags(outside / "shell_only.py")] == ["outside"]
    with pytest.raises(DagLoadError, match=r"is not under the current directory or a sys\.path entry"):
        load_dags(outside / "with-function.py")


def test_a_sibling_imported_through_the_file_directory_is_rejected(scratch: tuple[Path, str]) -> None:
    root, package = scratch
    (root / package / "helper.py").write_text("def work() -> None:\n    pass\n")
    (root / package / "dagfile.py").write_text(
        "import helper\nfrom schedd_sdk import DAG, task\nwith DAG('sib') as d:\n    task(helper.work)()\n"
    )
    with pytest.raises(DagLoadError) as info:
        load_dags(Path(package) / "dagfile.py")
    assert "names 'helper:work', but workers cannot import it" in str(info.value)
    assert f"import it as '{package}.helper'" in str(info.value)
    (root / package / "dagfile.py").write_text(
        f"from {package} import helper\nfrom schedd_sdk import DAG, task\n"
        "with DAG('sib') as d:\n    task(helper.work)()\n"
    )
    (spec,) = load_dags(Path(package) / "dagfile.py")
    assert spec.tasks[0].python.target == f"{package}.helper:work"


def test_a_syntax_error_is_shown(scratch: tuple[Path, str]) -> None:
    root, package = scratch
    (root / package / "bad.py").write_text("def oops(:\n")
    with pytest.raises(DagLoadError) as info:
        load_dags(Path(package) / "bad.py")
    assert "bad.py: importing it raised SyntaxError: invalid syntax" in str(info.value)
    assert "bad.py, line 1:\n    def oops(:" in str(info.value)


# --- examples and schedctl ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["etl_taskflow", "branching", "pools_and_priorities"])
def test_examples_load_validate_and_hash_stably(name: str) -> None:
    first = load_dags(EXAMPLES / f"{name}.py")
    second = load_dags(EXAMPLES / f"{name}.py")
    assert [s.dag_id for s in first] == [name]
    assert first == second
    assert version_hash(first[0]) == version_hash(second[0])
    from schedd_exec.python_child import resolve

    for task_spec in first[0].tasks:
        if task_spec.HasField("python"):
            assert task_spec.python.target.startswith("examples.tasks.")
            assert callable(resolve(task_spec.python.target))


def test_example_etl_taskflow() -> None:
    (spec,) = load_dags(EXAMPLES / "etl_taskflow.py")
    specs = by_id(spec)
    assert upstream(spec) == {
        "extract": [],
        "transform": ["extract"],
        "load": ["transform"],
        "report": ["load"],
        "cleanup": ["extract", "transform", "load"],
    }
    assert specs["extract"].retries == 3 and specs["extract"].retry_exponential_backoff
    assert specs["cleanup"].trigger_rule == pb.TRIGGER_RULE_ONE_FAILED
    assert specs["report"].HasField("shell")


def test_example_branching_and_pools() -> None:
    (branching,) = load_dags(EXAMPLES / "branching.py")
    specs = by_id(branching)
    assert specs["choose_path"].branch
    assert specs["publish"].trigger_rule == pb.TRIGGER_RULE_NONE_FAILED_MIN_ONE_SUCCESS
    assert upstream(branching)["publish"] == ["full_refresh", "incremental"]
    (pools,) = load_dags(EXAMPLES / "pools_and_priorities.py")
    specs = by_id(pools)
    assert specs["rebuild_index"].pool_slots == 2 and specs["rebuild_index"].priority_weight == 10
    assert {s.pool for s in pools.tasks if s.task_id != "report"} == {"warehouse"}


def test_specfile_reads_python_and_yaml() -> None:
    assert [s.dag_id for s in load_specs(SDK_EXAMPLES / "multi.py")] == [
        "multi_with",
        "multi_decorated",
        "multi_called",
    ]
    assert [s.dag_id for s in load_specs(EXAMPLES / "diamond.yaml")] == ["diamond"]
    assert load_spec(EXAMPLES / "diamond.yaml").dag_id == "diamond"
    assert load_spec(EXAMPLES / "branching.py").dag_id == "branching"
    with pytest.raises(SpecFileError, match=r"defines 3 DAGs \(multi_with, multi_decorated, multi_called\)"):
        load_spec(SDK_EXAMPLES / "multi.py")
    with pytest.raises(SpecFileError, match="defines no DAG"):
        load_specs(SDK_EXAMPLES / "no_dag.py")
