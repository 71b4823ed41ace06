"""DagGraph: edges, leaves, topological order, options and effective priority weights."""

from __future__ import annotations

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_core.triggers import TriggerRule
from tests.unit.helpers import dag, graph, task

DOWN = pb.WEIGHT_RULE_DOWNSTREAM
UP = pb.WEIGHT_RULE_UPSTREAM
ABS = pb.WEIGHT_RULE_ABSOLUTE


def _diamond(rule: int) -> DagGraph:
    """a -> b -> d, a -> c -> d, plus a lone task e; own weights 1, 2, 3, 4, 5."""
    return graph(
        task("a", priority_weight=1, weight_rule=rule),
        task("b", "a", priority_weight=2, weight_rule=rule),
        task("c", "a", priority_weight=3, weight_rule=rule),
        task("d", "b", "c", priority_weight=4, weight_rule=rule),
        task("e", priority_weight=5, weight_rule=rule),
    )


def _weights(g: DagGraph) -> dict[str, int]:
    return {tid: node.priority_weight for tid, node in g.nodes.items()}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        # own + every task downstream, each counted once (d is reached twice from a)
        (DOWN, {"a": 1 + 2 + 3 + 4, "b": 2 + 4, "c": 3 + 4, "d": 4, "e": 5}),
        (pb.WEIGHT_RULE_UNSPECIFIED, {"a": 10, "b": 6, "c": 7, "d": 4, "e": 5}),
        # own + every task upstream, each counted once
        (UP, {"a": 1, "b": 2 + 1, "c": 3 + 1, "d": 4 + 2 + 3 + 1, "e": 5}),
        (ABS, {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}),
    ],
    ids=["downstream", "unspecified", "upstream", "absolute"],
)
def test_weights_per_rule(rule: int, expected: dict[str, int]) -> None:
    assert _weights(_diamond(rule)) == expected


def test_weight_rules_mix_per_task_and_sum_own_weights() -> None:
    g = graph(
        task("a", priority_weight=10, weight_rule=ABS),
        task("b", "a", priority_weight=20),  # downstream: 20 + 300 (c's own weight, not its effective one)
        task("c", "b", priority_weight=300, weight_rule=UP),  # 300 + 20 + 10
    )
    assert _weights(g) == {"a": 10, "b": 320, "c": 330}


def test_unset_weight_counts_as_one() -> None:
    g = graph(task("a"), task("b", "a"), task("c", "b"))
    assert _weights(g) == {"a": 3, "b": 2, "c": 1}


def test_longer_chain_downstream_and_upstream() -> None:
    tasks = [task(f"t{i}", *([f"t{i - 1}"] if i else []), priority_weight=2**i) for i in range(5)]
    assert _weights(graph(*tasks)) == {"t0": 31, "t1": 30, "t2": 28, "t3": 24, "t4": 16}
    for t in tasks:
        t.weight_rule = UP
    assert _weights(graph(*tasks)) == {"t0": 1, "t1": 3, "t2": 7, "t3": 15, "t4": 31}


def test_edges_and_leaves() -> None:
    g = _diamond(DOWN)
    assert g.nodes["a"].upstream == frozenset()
    assert g.nodes["a"].downstream == {"b", "c"}
    assert g.nodes["d"].upstream == {"b", "c"}
    assert g.nodes["d"].downstream == frozenset()
    assert g.leaves == {"d", "e"}
    assert g.dag_id == "d"


def test_order_is_topological() -> None:
    # Listed downstream-first on purpose.
    g = graph(task("d", "b", "c"), task("c", "a"), task("b", "a"), task("a"))
    assert sorted(g.order) == ["a", "b", "c", "d"]
    position = {tid: i for i, tid in enumerate(g.order)}
    for tid, node in g.nodes.items():
        for up in node.upstream:
            assert position[up] < position[tid], (up, tid)


def test_defaults() -> None:
    node = graph(task("a")).nodes["a"]
    assert node.trigger_rule is TriggerRule.ALL_SUCCESS
    assert node.pool == "default_pool"
    assert node.pool_slots == 1
    assert node.queue == "default"
    assert node.max_tries == 1


def test_options_are_carried_over() -> None:
    spec = dag(
        task(
            "a",
            trigger_rule=pb.TRIGGER_RULE_ONE_FAILED,
            pool="gpu",
            pool_slots=3,
            queue="fast",
            retries=4,
        )
    )
    node = DagGraph.from_spec(spec).nodes["a"]
    assert node.trigger_rule is TriggerRule.ONE_FAILED
    assert (node.pool, node.pool_slots, node.queue) == ("gpu", 3, "fast")
    assert node.max_tries == 5


def test_default_pool_and_queue_can_be_chosen() -> None:
    g = DagGraph.from_spec(
        dag(task("a"), task("b", pool="p", queue="q")), default_pool="dp", default_queue="dq"
    )
    assert (g.nodes["a"].pool, g.nodes["a"].queue) == ("dp", "dq")
    assert (g.nodes["b"].pool, g.nodes["b"].queue) == ("p", "q")
