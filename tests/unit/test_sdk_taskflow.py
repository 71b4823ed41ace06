"""TaskFlow arguments, multiple outputs, task groups and setup/teardown tasks: what the SDK compiles,
what it refuses at definition time, and how a worker resolves the arguments
(``schedd_core.arguments``)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb
from schedd_core.arguments import ArgumentError, resolve_arguments
from schedd_core.errors import InvalidArgument
from schedd_core.spec import validate_spec
from schedd_sdk import DAG, DagDefinitionError, TaskGroup, shell, task_group
from tests.unit.helpers import dag, task
from tests.unit.sdk_examples import taskflow as f

MODULE = "tests.unit.sdk_examples.taskflow"


def by_id(spec: pb.DagSpec) -> dict[str, pb.TaskSpec]:
    return {t.task_id: t for t in spec.tasks}


def arguments_json(spec: pb.TaskSpec) -> str:
    """What a worker's executor hands the child (``schedd_exec.executor``)."""
    return json_format.MessageToJson(spec.python, preserving_proto_field_name=True)


# --- arguments ------------------------------------------------------------------------------------------


def test_values_keys_literals_and_nesting_compile_to_arguments_and_edges() -> None:
    with DAG("flow") as d:
        raw = f.numbers(4)
        parts = f.split(raw)
        f.total(parts["odd"], scale=2, label="odd")
        f.combine([raw, {"even": parts["even"], "n": None}], second=1.5)
    specs = by_id(d.to_spec())
    assert list(specs["split"].upstream) == ["numbers"]
    assert list(specs["total"].upstream) == ["split"]
    assert list(specs["combine"].upstream) == ["numbers", "split"]
    assert json.loads(arguments_json(specs["total"])) == {
        "target": f"{MODULE}:total",
        "args": [{"result": {"task_id": "split", "key": "odd"}}],
        "kwargs": {"scale": {"literal": 2.0}, "label": {"literal": "odd"}},
    }
    assert not specs["numbers"].python.kwargs and specs["numbers"].python.args[0].literal.number_value == 4


def test_a_worker_resolves_the_arguments_from_the_upstream_results() -> None:
    with DAG("flow") as d:
        raw = f.numbers(4)
        parts = f.split(raw)
        f.total(parts["odd"], scale=2, label="odd")
        f.combine([raw, {"even": parts["even"], "n": None}], second=1.5)
    specs = by_id(d.to_spec())
    upstream = {"numbers": [1, 2, 3, 4], "split": {"odd": [1, 3], "even": [2, 4]}}
    assert resolve_arguments(arguments_json(specs["numbers"]), {}) == ([4], {})  # an int stays an int
    args, kwargs = resolve_arguments(arguments_json(specs["total"]), upstream)
    assert args == [[1, 3]] and kwargs == {"scale": 2, "label": "odd"}
    assert f.total(*args, **kwargs) == {"total": 8, "label": "odd"}
    args, kwargs = resolve_arguments(arguments_json(specs["combine"]), upstream)
    assert args == [[[1, 2, 3, 4], {"even": [2, 4], "n": None}]] and kwargs == {"second": 1.5}


def test_an_upstream_without_a_value_resolves_to_none_and_a_missing_key_is_an_error() -> None:
    with DAG("flow") as d:
        parts = f.split(f.numbers())
        f.total(parts["odd"])
        f.combine(parts)
    specs = by_id(d.to_spec())
    assert resolve_arguments(arguments_json(specs["total"]), {}) == ([None], {})  # skipped or returned None
    assert resolve_arguments(arguments_json(specs["combine"]), {}) == ([None], {})
    with pytest.raises(
        ArgumentError, match=r"split\['odd'\]: 'split' returned no key 'odd' \(its keys: 'x'\)"
    ):
        resolve_arguments(arguments_json(specs["total"]), {"split": {"x": 1}})
    with pytest.raises(ArgumentError, match=r"'split' returned a list, not a JSON object"):
        resolve_arguments(arguments_json(specs["total"]), {"split": [1]})


def test_mistaken_references_are_authoring_errors_naming_the_task() -> None:
    with DAG("other"):
        elsewhere = f.numbers()
    with DAG("flow"):
        with pytest.raises(
            DagDefinitionError, match=r"cannot make 'numbers' \(DAG 'other'\) upstream of 'total'"
        ):
            f.total(elsewhere)
        echo = shell("echo hi", task_id="echo")
        with pytest.raises(
            DagDefinitionError, match=r"total\(\): argument 1 is the shell task 'echo', which returns"
        ):
            f.total(echo)
        with pytest.raises(DagDefinitionError, match=r"echo\['k'\]: the shell task 'echo' returns no value"):
            _ = echo["k"]
        with pytest.raises(DagDefinitionError, match=r"numbers\[1\]: a result key is a string"):
            f.numbers()[1]
        with pytest.raises(
            DagDefinitionError, match=r"total\(\): the arguments do not fit .*unexpected keyword"
        ):
            f.total(f.numbers(), scael=2)
        with pytest.raises(
            DagDefinitionError, match=r"total\(\): the arguments do not fit .*missing a required"
        ):
            f.total()


def test_a_reference_to_a_task_that_is_not_upstream_is_refused_by_the_validator() -> None:
    spec = dag(
        task("a", python=pb.PythonCallable(target="m:a")),
        task(
            "b",
            python=pb.PythonCallable(
                target="m:b", kwargs={"x": pb.Argument(result=pb.ResultReference(task_id="a"))}
            ),
        ),
    )
    with pytest.raises(InvalidArgument) as info:
        validate_spec(spec)
    assert info.value.field == "spec.tasks[1].python.kwargs['x'].result"
    assert "'a', which is not an upstream task" in info.value.problem
    spec.tasks[1].upstream.append("a")
    validate_spec(spec)


def test_multiple_outputs_is_given_or_inferred_from_a_dict_return_and_checked() -> None:
    assert f.split.multiple_outputs and f.not_a_dict.multiple_outputs
    assert not f.numbers.multiple_outputs and not f.combine.multiple_outputs
    assert f.split([1, 2]) == {"odd": [1], "even": [2]}
    with pytest.raises(TypeError, match="has multiple_outputs, so it must return a dict with string keys"):
        f.not_a_dict()


# --- task groups --------------------------------------------------------------------------------------------


def test_groups_prefix_ids_share_default_args_and_are_recorded() -> None:
    with DAG("grouped", default_args={"retries": 1, "queue": "q"}) as d:
        start = shell("echo start", task_id="start")
        with TaskGroup("extract", default_args={"retries": 4}) as extract:
            raw = f.numbers()
            with TaskGroup("inner", default_args={"pool": "p"}):
                f.total(raw)
            shell("true", task_id="check", retries=0)
        with TaskGroup("flat", prefix_group_id=False):
            f.split(raw)
        end = shell("echo end", task_id="end")
        start >> extract >> end
    specs = by_id(d.to_spec())
    assert list(specs) == ["start", "extract.numbers", "extract.inner.total", "extract.check", "split", "end"]
    assert [specs[t].group for t in specs] == ["", "extract", "extract.inner", "extract", "flat", ""]
    assert specs["extract.numbers"].retries == 4 and specs["extract.numbers"].queue == "q"
    assert specs["extract.inner.total"].retries == 4 and specs["extract.inner.total"].pool == "p"
    assert specs["extract.check"].retries == 0 and specs["start"].retries == 1
    # start >> group: the group's roots; group >> end: its leaves
    assert list(specs["extract.numbers"].upstream) == ["start"] and list(specs["extract.check"].upstream) == [
        "start"
    ]
    assert sorted(specs["end"].upstream) == ["extract.check", "extract.inner.total"]


def test_lists_of_groups_and_groups_of_groups_make_edges() -> None:
    with DAG("fan") as d:
        with TaskGroup("a") as a:
            f.numbers()
        with TaskGroup("b") as b:
            f.numbers()
        join = shell("true", task_id="join")
        [a, b] >> join
        join >> [shell("true", task_id="x"), shell("true", task_id="y")]
    assert sorted(by_id(d.to_spec())["join"].upstream) == ["a.numbers", "b.numbers"]
    with DAG("empty"):
        with TaskGroup("nothing") as nothing:
            pass
        with pytest.raises(DagDefinitionError, match="task group 'nothing' has no tasks"):
            nothing >> shell("true", task_id="t")


def test_the_task_group_decorator_numbers_repeated_groups_and_passes_results_on() -> None:
    @task_group(default_args={"retries": 2})
    def section(count: int) -> Any:
        return f.numbers(count)

    with DAG("decorated") as d:
        first = section(2)
        second = section(3)
        f.combine(first, second)
    specs = by_id(d.to_spec())
    assert list(specs) == ["section.numbers", "section__1.numbers", "combine"]
    assert specs["section__1.numbers"].group == "section__1" and specs["section.numbers"].retries == 2
    assert list(specs["combine"].upstream) == ["section.numbers", "section__1.numbers"]


def test_bad_groups_are_refused() -> None:
    with pytest.raises(DagDefinitionError, match="outside a DAG definition"):
        TaskGroup("g")
    with DAG("bad"):
        with pytest.raises(DagDefinitionError, match=r"cannot contain '\.'"):
            TaskGroup("a.b")
        with pytest.raises(DagDefinitionError, match="unknown option"):
            TaskGroup("g", default_args={"owner": "me"})
        TaskGroup("g")
        with pytest.raises(DagDefinitionError, match="already has a task group 'g'"):
            TaskGroup("g")


# --- setup and teardown -------------------------------------------------------------------------------------


def test_setup_and_teardown_by_decorator_and_by_method() -> None:
    with DAG("scratch") as d:
        path = f.make_scratch()
        f.work(path) >> f.drop_scratch(path)
        made = shell("mkdir -p /tmp/x", task_id="mkdir")
        used = shell("ls /tmp/x", task_id="ls")
        made >> used >> shell("rm -r /tmp/x", task_id="rm").as_teardown(setups=made)
        shell("true", task_id="other").as_setup()
    specs = by_id(d.to_spec())
    assert specs["make_scratch"].setup and specs["mkdir"].setup and specs["other"].setup
    for teardown_id in ("drop_scratch", "rm"):
        assert specs[teardown_id].teardown
        assert specs[teardown_id].trigger_rule == pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS
    assert sorted(specs["drop_scratch"].upstream) == ["make_scratch", "work"]
    assert sorted(specs["rm"].upstream) == ["ls", "mkdir"]
    assert not specs["work"].setup and not specs["work"].teardown


def test_setup_and_teardown_mistakes_are_refused() -> None:
    from schedd_sdk import teardown

    with pytest.raises(DagDefinitionError, match="trigger rule is all_done_setup_success; it cannot be set"):
        teardown(trigger_rule="all_done")
    with DAG("mixed"):
        with pytest.raises(DagDefinitionError, match="is a setup; it cannot also be a teardown"):
            f.make_scratch().as_teardown()
        with pytest.raises(DagDefinitionError, match="is a teardown; it cannot also be a setup"):
            f.drop_scratch("/x").as_setup()
    for spec_task, problem in [
        (task("t", setup=True, teardown=True), "both a setup and a teardown"),
        (task("t", teardown=True), "a teardown task's trigger rule is all_done_setup_success"),
        (task("t", trigger_rule=pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS), "the rule of teardown tasks only"),
        (task("t", group="a b"), "is not a valid id"),
    ]:
        with pytest.raises(InvalidArgument, match=problem):
            validate_spec(dag(spec_task))
