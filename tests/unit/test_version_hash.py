"""version_hash: the identity of a DAG version."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest
from google.protobuf.duration_pb2 import Duration
from google.protobuf.struct_pb2 import Struct
from hypothesis import given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.version_identity import canonical, version_hash
from tests.unit.helpers import dag, dag_specs, task


def base() -> pb.DagSpec:
    return dag(
        task("a"),
        task("b", "a"),
        task("c", "a", "b", env={"X": "1", "Y": "2"}),
        dag_id="etl",
        tags=["nightly", "etl"],
        schedule="@daily",
    )


def copy(spec: pb.DagSpec) -> pb.DagSpec:
    out = pb.DagSpec()
    out.CopyFrom(spec)
    return out


def test_hash_is_16_hex_digits_and_stable() -> None:
    h = version_hash(base())
    assert re.fullmatch(r"[0-9a-f]{16}", h)
    assert version_hash(base()) == h
    assert version_hash(copy(base())) == h


def test_hash_of_a_known_spec_does_not_drift() -> None:
    # A golden value: changing it re-versions every registered DAG.
    spec = pb.DagSpec(
        dag_id="golden",
        tasks=[
            pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="echo a")),
            pb.TaskSpec(task_id="b", upstream=["a"], python=pb.PythonCallable(target="m:f"), retries=2),
        ],
        tags=["x", "y"],
    )
    assert version_hash(spec) == "83759486614a03be"


def test_hash_survives_a_serialisation_round_trip() -> None:
    spec = base()
    assert version_hash(pb.DagSpec.FromString(spec.SerializeToString())) == version_hash(spec)


def test_upstream_order_does_not_matter() -> None:
    spec = base()
    spec.tasks[2].upstream[:] = ["b", "a"]
    assert version_hash(spec) == version_hash(base())


def test_duplicate_upstream_ids_do_not_matter() -> None:
    spec = base()
    spec.tasks[2].upstream[:] = ["a", "b", "a"]
    assert version_hash(spec) == version_hash(base())


def test_tag_order_and_duplicates_do_not_matter() -> None:
    spec = base()
    spec.tags[:] = ["etl", "nightly", "etl"]
    assert version_hash(spec) == version_hash(base())


def test_env_insertion_order_does_not_matter() -> None:
    one = base()
    one.tasks[2].env.clear()
    one.tasks[2].env["Y"] = "2"
    one.tasks[2].env["X"] = "1"
    assert version_hash(one) == version_hash(base())


def test_params_insertion_order_does_not_matter() -> None:
    p1, p2 = Struct(), Struct()
    p1.update({"a": 1, "b": {"c": "x", "d": [1, 2]}})
    p2.update({"b": {"d": [1, 2], "c": "x"}, "a": 1})
    one, two = base(), base()
    one.params.CopyFrom(p1)
    two.params.CopyFrom(p2)
    assert version_hash(one) == version_hash(two)


def test_hashing_does_not_modify_the_spec() -> None:
    spec = base()
    spec.tasks[2].upstream[:] = ["b", "a"]
    spec.tags[:] = ["z", "a"]
    version_hash(spec)
    assert list(spec.tasks[2].upstream) == ["b", "a"]
    assert list(spec.tags) == ["z", "a"]


def test_canonical_sorts_and_dedups() -> None:
    spec = base()
    spec.tasks[2].upstream[:] = ["b", "a", "b"]
    spec.tags[:] = ["z", "a", "z"]
    c = canonical(spec)
    assert list(c.tasks[2].upstream) == ["a", "b"]
    assert list(c.tags) == ["a", "z"]


def _set_command(s: pb.DagSpec) -> None:
    s.tasks[0].shell.command = "false"


def _add_task(s: pb.DagSpec) -> None:
    s.tasks.append(task("d", "c"))


def _remove_edge(s: pb.DagSpec) -> None:
    s.tasks[1].upstream.remove("a")


def _move_edge(s: pb.DagSpec) -> None:
    # Same number of edges between the same tasks, reversed: a -> b becomes b -> a.
    s.tasks[1].upstream[:] = []
    s.tasks[0].upstream[:] = ["b"]


def _swap_action(s: pb.DagSpec) -> None:
    s.tasks[0].python.target = "m:f"


CHANGES: dict[str, Callable[[pb.DagSpec], object]] = {
    "dag_id": lambda s: setattr(s, "dag_id", "etl2"),
    "description": lambda s: setattr(s, "description", "x"),
    "schedule": lambda s: setattr(s, "schedule", "@hourly"),
    "max_active_runs": lambda s: setattr(s, "max_active_runs", 2),
    "tag added": lambda s: s.tags.append("new"),
    "tag renamed": lambda s: s.tags.__setitem__(0, "weekly"),
    "command": _set_command,
    "action kind": _swap_action,
    "task added": _add_task,
    "edge removed": _remove_edge,
    "edges moved": _move_edge,
    "task renamed": lambda s: setattr(s.tasks[0], "task_id", "a2"),
    "retries": lambda s: setattr(s.tasks[1], "retries", 1),
    "retry_delay": lambda s: s.tasks[1].retry_delay.CopyFrom(Duration(seconds=1)),
    "trigger_rule": lambda s: setattr(s.tasks[2], "trigger_rule", pb.TRIGGER_RULE_ALL_DONE),
    "priority_weight": lambda s: setattr(s.tasks[2], "priority_weight", 7),
    "weight_rule": lambda s: setattr(s.tasks[2], "weight_rule", pb.WEIGHT_RULE_ABSOLUTE),
    "pool": lambda s: setattr(s.tasks[0], "pool", "db"),
    "queue": lambda s: setattr(s.tasks[0], "queue", "fast"),
    "env value": lambda s: s.tasks[2].env.__setitem__("X", "2"),
    "env key": lambda s: s.tasks[2].env.__setitem__("Z", "1"),
}


@pytest.mark.parametrize("change", list(CHANGES))
def test_real_changes_change_the_hash(change: str) -> None:
    spec = base()
    CHANGES[change](spec)
    assert spec != base(), "the change did nothing"
    assert version_hash(spec) != version_hash(base())


@settings(max_examples=150, deadline=None)
@given(dag_specs(max_tasks=10), st.randoms(use_true_random=False))
def test_shuffling_upstream_lists_and_tags_keeps_the_hash(spec: pb.DagSpec, rnd: random.Random) -> None:
    spec.tags[:] = ["t1", "t2", "t3", "t4"]
    before = version_hash(spec)
    shuffled = copy(spec)
    for t in shuffled.tasks:
        ups = list(t.upstream)
        rnd.shuffle(ups)
        t.upstream[:] = ups
    tags = list(shuffled.tags)
    rnd.shuffle(tags)
    shuffled.tags[:] = tags
    assert version_hash(shuffled) == before


@settings(max_examples=100, deadline=None)
@given(dag_specs(max_tasks=10))
def test_adding_an_edge_changes_the_hash(spec: pb.DagSpec) -> None:
    ids = sorted((t.task_id for t in spec.tasks), key=lambda tid: int(tid[1:]))
    by_id = {t.task_id: t for t in spec.tasks}
    before = version_hash(spec)
    for j, tid in enumerate(ids):
        missing = [u for u in ids[:j] if u not in by_id[tid].upstream]
        if missing:
            by_id[tid].upstream.append(missing[0])
            assert version_hash(spec) != before
            return
    spec.tasks.append(task("extra", *ids))  # already complete: grow it
    assert version_hash(spec) != before


def test_task_order_does_not_change_the_hash() -> None:
    from schedd.v1 import resources_pb2 as pb
    from schedd_core.version_identity import version_hash

    a = pb.TaskSpec(task_id="a", shell=pb.ShellCommand(command="true"))
    b = pb.TaskSpec(task_id="b", upstream=["a"], shell=pb.ShellCommand(command="true"))
    assert version_hash(pb.DagSpec(dag_id="d", tasks=[a, b])) == version_hash(
        pb.DagSpec(dag_id="d", tasks=[b, a])
    )
