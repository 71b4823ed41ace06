"""schedd_core.handoffs: which successor a task instance hands off to, and which hand-offs a pass
writes. The property test ties hand-offs to the planner: a hand-off starts only what the leader's
own plan would have made ready once its source succeeded."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_core.handoffs import Handoff, plan_handoffs, sources_to_review, successor
from schedd_core.pass_plan import PlannedRun
from schedd_core.planner import RunPlan, TaskSnapshot, plan_run
from schedd_core.states import TaskState
from tests.unit.helpers import dag, dag_specs, graph, task
from tests.unit.pass_fakes import run

T = TaskState


def chain() -> DagGraph:
    return graph(task("a"), task("b", "a"), task("c", "b"))


def test_each_link_of_a_chain_hands_off_to_the_next() -> None:
    g = chain()
    assert successor(g, {}, "a") == ("b", ())
    assert successor(g, {}, "b") == ("c", ())
    assert successor(g, {}, "c") is None


def test_a_join_hands_off_only_from_its_last_unfinished_upstream() -> None:
    g = graph(task("a"), task("b"), task("j", "a", "b"))
    assert successor(g, {"a": T.RUNNING, "b": T.RUNNING}, "a") is None
    assert successor(g, {"a": T.RUNNING, "b": T.SUCCESS}, "a") == ("j", ("b",))


def test_a_finished_source_or_a_started_target_hands_nothing_off() -> None:
    g = chain()
    for finished in (T.SUCCESS, T.FAILED, T.SKIPPED, T.UPSTREAM_FAILED):
        assert successor(g, {"a": finished}, "a") is None
    for started in (T.QUEUED, T.RUNNING, T.SUCCESS, T.SKIPPED):
        assert successor(g, {"a": T.RUNNING, "b": started}, "a") is None


def test_of_several_successors_the_most_important_is_handed_off() -> None:
    g = graph(task("a"), task("low", "a"), task("high", "a", priority_weight=10))
    assert successor(g, {}, "a") == ("high", ())


def test_what_needs_a_decision_of_the_leader_is_never_handed_off() -> None:
    needs_the_leader = [
        task("b", "a", trigger_rule=pb.TRIGGER_RULE_ALL_DONE),
        task("b", "a", pool="other"),
        task("b", "a", pool_slots=2),
        task("b", "a", depends_on_past=True),
        task("b", "a", max_active_instances=1),
        task("b", "a", setup=True),
    ]
    for target in needs_the_leader:
        assert successor(graph(task("a"), target), {}, "a") is None, target
    assert successor(graph(task("a", branch=True), task("b", "a")), {}, "a") is None


def test_a_change_is_reviewed_where_it_can_complete_a_hand_off() -> None:
    g = graph(task("a"), task("b"), task("j", "a", "b"), task("k", "j"))
    assert sources_to_review(g, ["b"]) == {"a", "b"}
    assert sources_to_review(g, ["j"]) == {"j"}


def _planned(g: DagGraph, states: dict[str, T], **fields: object) -> PlannedRun:
    fake = run(1, states)
    for name, value in fields.items():
        setattr(fake, name, value)
    return PlannedRun(fake, g, RunPlan())


def test_a_pass_writes_only_what_is_not_in_place_and_reviews_a_full_read_in_full() -> None:
    g = chain()
    states = {"a": T.QUEUED, "b": T.NONE, "c": T.NONE}
    everything = [Handoff(1, 0, "a", "b", (), True), Handoff(1, 0, "b", "c", (), True)]
    assert plan_handoffs([_planned(g, states)], {}) == everything
    # Read in full (a new term, a clear): what the leader remembers may be void; all again.
    assert plan_handoffs([_planned(g, states)], {1: {"a": "b", "b": "c"}}) == everything
    # Read incrementally: only what the changes reach, and only what is not in place.
    incremental = _planned(g, states, changed={"a"})
    assert plan_handoffs([incremental], {1: {"a": "b"}}) == []
    assert plan_handoffs([incremental], {1: {"b": "c"}}) == [Handoff(1, 0, "a", "b", (), True)]
    # Reviewed in full before and found nothing to write: a change far from any hand-off costs
    # nothing more (a large fan-out is not reviewed again on every result).
    assert plan_handoffs([_planned(g, states, changed={"c"})], {1: {}}) == []


def test_a_hand_off_is_quiet_only_to_its_sources_only_downstream_task() -> None:
    # a -> b and a -> c: a's success also makes c ready, so the leader must plan it at once.
    fork = graph(task("a"), task("b", "a"), task("c", "a"), task("d", "b"))
    by_source = {h.source: h for h in plan_handoffs([_planned(fork, {})], {})}
    assert by_source["a"].quiet is False
    assert by_source["b"] == Handoff(1, 0, "b", "d", (), True)


def test_paused_and_finishing_runs_get_no_hand_offs() -> None:
    g = chain()
    assert plan_handoffs([_planned(g, {}, paused=True)], {}) == []
    assert plan_handoffs([_planned(g, {}, state="success")], {}) == []


@settings(max_examples=300, deadline=None)
@given(spec=dag_specs(trigger_rules=True), data=st.data())
def test_a_hand_off_starts_only_what_the_plan_makes_ready(spec: pb.DagSpec, data: st.DataObject) -> None:
    g = DagGraph.from_spec(spec)
    states = {tid: data.draw(st.sampled_from(list(T)), label=tid) for tid in g.order}
    for source in g.order:
        found = successor(g, states, source)
        if found is None:
            continue
        target, after = found
        succeeded = {**states, source: T.SUCCESS}
        assert all(succeeded[a] is T.SUCCESS for a in after)
        tasks = {tid: TaskSnapshot(s) for tid, s in succeeded.items()}
        assert target in plan_run(g, tasks).to_queue, (source, target, succeeded)


def test_a_join_is_handed_off_but_a_successor_with_another_rule_is_left_to_the_leader() -> None:
    spec = dag(
        task("a"),
        task("b", "a"),
        task("c", "a", "b"),
        task("d", "c", trigger_rule=pb.TRIGGER_RULE_ONE_SUCCESS),
    )
    g = DagGraph.from_spec(spec)
    assert successor(g, {"a": T.SUCCESS, "b": T.RUNNING}, "b") == ("c", ("a",))
    assert successor(g, {"a": T.SUCCESS, "b": T.SUCCESS, "c": T.RUNNING}, "c") is None
