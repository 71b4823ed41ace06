"""The trigger rules Airflow 3 added to the nine, and setup and teardown tasks.

Tables per rule and upstream state combination (``upstream_failed`` apart from ``failed`` and setups
apart from the other upstream tasks, since these rules tell them apart), an exhaustive comparison of
all thirteen rules with Airflow 3's ``TriggerRuleDep`` restated, and the planner running setup, work
and teardown tasks: a teardown runs when its setup succeeded whatever its work did, and a run's state
ignores it.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from schedd.v1 import resources_pb2 as pb
from schedd_core.graph import DagGraph
from schedd_core.planner import plan_run, run_outcome
from schedd_core.states import RunState, TaskState
from schedd_core.triggers import TriggerRule, UpstreamCounts, Verdict, evaluate, evaluate_setups
from tests.unit.helpers import dag, snaps, task

TR = TriggerRule
T = TaskState
READY = Verdict.READY
WAIT = Verdict.WAIT
SKIP = Verdict.SKIP
UF = Verdict.UPSTREAM_FAILED


def counts(
    total: int, success: int = 0, failed: int = 0, upstream_failed: int = 0, skipped: int = 0
) -> UpstreamCounts:
    """Counts of upstream tasks that are not setups; ``failed`` here is failed only."""
    return UpstreamCounts(
        total=total,
        success=success,
        failed=failed + upstream_failed,
        skipped=skipped,
        upstream_failed=upstream_failed,
    )


#: (counts, verdict) per rule; counts(total, success, failed, upstream_failed, skipped).
NEW_TABLES: dict[TriggerRule, list[tuple[UpstreamCounts, Verdict]]] = {
    TR.ONE_DONE: [
        (counts(0), READY),
        (counts(3), WAIT),
        (counts(3, success=1), READY),  # does not wait for the others
        (counts(3, failed=1), READY),
        (counts(3, skipped=2), WAIT),
        (counts(3, upstream_failed=2), WAIT),  # upstream_failed is not "done" for this rule
        (counts(3, skipped=2, upstream_failed=1), SKIP),
        (counts(3, skipped=3), SKIP),
        (counts(3, upstream_failed=3), SKIP),
    ],
    TR.ALL_SKIPPED: [
        (counts(0), READY),
        (counts(3), WAIT),
        (counts(3, skipped=2), WAIT),
        (counts(3, skipped=3), READY),
        (counts(3, success=1), SKIP),  # decides at once
        (counts(3, failed=1), SKIP),
        (counts(3, upstream_failed=1, skipped=2), SKIP),
    ],
    TR.ALL_DONE_MIN_ONE_SUCCESS: [
        (counts(0), READY),
        (counts(3), WAIT),
        (counts(3, success=2), WAIT),
        (counts(3, success=1, failed=1, upstream_failed=1), READY),
        (counts(3, success=3), READY),
        (counts(3, failed=2, upstream_failed=1), UF),  # all done, no success
        (counts(3, failed=1), WAIT),
        (counts(3, skipped=1), SKIP),  # a skip decides at once (Airflow: skipped is not done here)
        (counts(3, success=2, skipped=1), SKIP),
    ],
    TR.ALL_DONE_SETUP_SUCCESS: [
        (counts(0), READY),
        (counts(2), WAIT),
        (counts(2, failed=1), WAIT),
        (counts(2, failed=2), READY),  # without setups it is all_done
        (counts(2, skipped=2), READY),
        # one setup and one work task
        (UpstreamCounts(total=2, success=1, failed=1, setups=1, setup_success=1), READY),
        (UpstreamCounts(total=2, success=1, setups=1, setup_success=1), WAIT),
        (UpstreamCounts(total=2, success=2, setups=1, setup_success=1), READY),
        (UpstreamCounts(total=2, failed=2, upstream_failed=1, setups=1), UF),  # the setup failed
        (UpstreamCounts(total=2, skipped=2, setups=1, setup_skipped=1), SKIP),
        (UpstreamCounts(total=2, success=1, skipped=1, setups=1, setup_skipped=1), SKIP),
        # two setups: one success is enough, all skipped skips
        (UpstreamCounts(total=3, success=1, failed=2, setups=2, setup_success=1), READY),
        (UpstreamCounts(total=3, skipped=2, failed=1, setups=2, setup_skipped=2), SKIP),
        (UpstreamCounts(total=3, skipped=1, failed=2, setups=2, setup_skipped=1), UF),
    ],
}

CASES = [(rule, c, v) for rule, rows in NEW_TABLES.items() for c, v in rows]


@pytest.mark.parametrize(("rule", "c", "verdict"), CASES, ids=[f"{r}-{c}" for r, c, _ in CASES])
def test_new_rule_table(rule: TriggerRule, c: UpstreamCounts, verdict: Verdict) -> None:
    assert evaluate(rule, c) is verdict


def test_the_rules_are_airflow_3s_thirteen() -> None:
    assert {r.value for r in TriggerRule} == {
        "all_success",
        "all_failed",
        "all_done",
        "all_done_setup_success",
        "one_success",
        "one_failed",
        "one_done",
        "none_failed",
        "none_skipped",
        "always",
        "none_failed_min_one_success",
        "all_skipped",
        "all_done_min_one_success",
    }
    for rule in TriggerRule:
        assert TriggerRule.from_proto(rule.to_proto()) is rule


@dataclass(frozen=True)
class _Tally:
    """Airflow's own counters of a task's direct upstream tasks (``failed`` excludes
    upstream_failed, as Airflow counts them apart)."""

    c: UpstreamCounts

    @property
    def success(self) -> int:
        return self.c.success

    @property
    def skipped(self) -> int:
        return self.c.skipped

    @property
    def upstream(self) -> int:
        return self.c.total

    @property
    def upstream_failed(self) -> int:
        return self.c.upstream_failed

    @property
    def failed(self) -> int:
        return self.c.failed - self.c.upstream_failed

    @property
    def done(self) -> int:
        return self.success + self.skipped + self.failed + self.upstream_failed

    @property
    def upstream_done(self) -> bool:
        return self.done >= self.upstream


def _first(*cases: tuple[bool, Verdict]) -> Verdict | None:
    return next((verdict for holds, verdict in cases if holds), None)


#: The state Airflow 3 sets before checking the dependency (``flag_upstream_failed``), per rule.
_FLAGGED: dict[TriggerRule, Callable[[_Tally], Verdict | None]] = {
    TR.ALL_SUCCESS: lambda t: _first((bool(t.upstream_failed or t.failed), UF), (bool(t.skipped), SKIP)),
    TR.ALL_FAILED: lambda t: _first((bool(t.success or t.skipped), SKIP)),
    TR.ALL_DONE: lambda t: None,
    TR.ONE_SUCCESS: lambda t: _first(
        (t.upstream_done and t.done == t.skipped, SKIP), (t.upstream_done and t.success <= 0, UF)
    ),
    TR.ONE_FAILED: lambda t: _first((t.upstream_done and not (t.failed or t.upstream_failed), SKIP)),
    TR.ONE_DONE: lambda t: _first((t.upstream_done and not (t.failed or t.success), SKIP)),
    TR.NONE_FAILED: lambda t: _first((bool(t.upstream_failed or t.failed), UF)),
    TR.NONE_FAILED_MIN_ONE_SUCCESS: lambda t: _first(
        (bool(t.upstream_failed or t.failed), UF), (t.skipped == t.upstream, SKIP)
    ),
    TR.NONE_SKIPPED: lambda t: _first((bool(t.skipped), SKIP)),
    TR.ALL_SKIPPED: lambda t: _first((bool(t.success or t.failed or t.upstream_failed), SKIP)),
    TR.ALL_DONE_MIN_ONE_SUCCESS: lambda t: _first(
        (t.skipped > 0, SKIP),
        (t.success + t.failed + t.upstream_failed >= t.upstream - t.skipped and t.success == 0, UF),
    ),
    TR.ALL_DONE_SETUP_SUCCESS: lambda t: _first(
        (t.upstream_done and bool(t.c.setups) and t.c.setup_skipped >= t.c.setups, SKIP),
        (t.upstream_done and bool(t.c.setups) and t.c.setup_success == 0, UF),
    ),
}

#: Whether the dependency then passes, per rule.
_PASSES: dict[TriggerRule, Callable[[_Tally], bool]] = {
    TR.ONE_SUCCESS: lambda t: t.success > 0,
    TR.ONE_FAILED: lambda t: t.failed + t.upstream_failed > 0,
    TR.ONE_DONE: lambda t: t.success + t.failed > 0,
    TR.ALL_SUCCESS: lambda t: t.upstream - t.success <= 0,
    TR.ALL_FAILED: lambda t: t.upstream - t.failed - t.upstream_failed <= 0,
    TR.ALL_DONE: lambda t: t.upstream_done,
    TR.NONE_FAILED: lambda t: t.upstream - t.success - t.skipped <= 0,
    TR.NONE_FAILED_MIN_ONE_SUCCESS: lambda t: t.upstream - t.success - t.skipped <= 0,
    TR.NONE_SKIPPED: lambda t: t.upstream_done and not t.skipped,
    TR.ALL_SKIPPED: lambda t: t.upstream - t.skipped <= 0,
    TR.ALL_DONE_SETUP_SUCCESS: lambda t: t.upstream_done and not (t.c.setups and not t.c.setup_success),
    TR.ALL_DONE_MIN_ONE_SUCCESS: lambda t: not t.skipped and t.done >= t.upstream and t.success > 0,
}


def _airflow3(rule: TriggerRule, c: UpstreamCounts) -> Verdict:
    """Airflow 3's ``TriggerRuleDep._evaluate_direct_relatives``, restated: the state it would set
    (``flag_upstream_failed``), then whether the dependency passes."""
    if c.total == 0 or rule is TR.ALWAYS:
        return READY
    tally = _Tally(c)
    flagged = _FLAGGED[rule](tally)
    if flagged is not None:
        return flagged
    return READY if _PASSES[rule](tally) else WAIT


def _every_count(max_total: int) -> list[UpstreamCounts]:
    """Every split of up to ``max_total`` upstream tasks, setups among them, into states."""
    found = []
    states = ("success", "failed", "upstream_failed", "skipped", "running")
    for total in range(max_total + 1):
        for work in itertools.product(states, repeat=total):
            for setups in range(total + 1):  # the first ``setups`` upstream tasks are setups
                setup_states = work[:setups]
                found.append(
                    UpstreamCounts(
                        total=total,
                        success=work.count("success"),
                        failed=work.count("failed") + work.count("upstream_failed"),
                        skipped=work.count("skipped"),
                        upstream_failed=work.count("upstream_failed"),
                        setups=setups,
                        setup_success=setup_states.count("success"),
                        setup_skipped=setup_states.count("skipped"),
                    )
                )
    return found


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_every_rule_matches_airflow_3_for_every_state_combination_up_to_four_upstream(
    rule: TriggerRule,
) -> None:
    for c in _every_count(4):
        assert evaluate(rule, c) is _airflow3(rule, c), c


@pytest.mark.parametrize("rule", list(TriggerRule))
def test_no_rule_waits_once_every_upstream_is_done(rule: TriggerRule) -> None:
    for c in _every_count(3):
        if c.done == c.total:
            assert evaluate(rule, c) is not WAIT, c


@pytest.mark.parametrize(
    ("c", "verdict"),
    [
        (counts(2), WAIT),
        (counts(2, success=1), WAIT),
        (counts(2, success=2), READY),
        (counts(2, failed=1), UF),  # does not wait for the other setup
        (counts(2, upstream_failed=1), UF),
        (counts(2, skipped=1), SKIP),
        (counts(2, skipped=1, failed=1), UF),
    ],
)
def test_the_setup_constraint_over_indirect_setups(c: UpstreamCounts, verdict: Verdict) -> None:
    assert evaluate_setups(c) is verdict


# --- setup, work and teardown through the planner ----------------------------------------------------


def setup_work_teardown(work_rule: int = pb.TRIGGER_RULE_UNSPECIFIED) -> DagGraph:
    """create_cluster (setup) >> run_job >> report >> delete_cluster (teardown of create_cluster)."""
    return DagGraph.from_spec(
        dag(
            task("create_cluster", setup=True),
            task("run_job", "create_cluster"),
            task("report", "run_job", trigger_rule=work_rule),
            task(
                "delete_cluster",
                "create_cluster",
                "report",
                teardown=True,
                trigger_rule=pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS,
            ),
        )
    )


def settle(g: DagGraph, outcomes: dict[str, TaskState]) -> dict[str, object]:
    """Run the planner to the end: every task it queues ends in ``outcomes[task]`` (success if absent);
    the run's final state is under ``"<run>"``."""
    states: dict[str, TaskState] = {}
    for _ in range(len(g.order) + 2):  # each pass finishes at least one task
        plan = plan_run(g, snaps(states))
        for tid in plan.to_create:
            states.setdefault(tid, T.NONE)
        for tid in plan.to_skip:
            states[tid] = T.SKIPPED
        for tid in plan.to_upstream_failed:
            states[tid] = T.UPSTREAM_FAILED
        for tid in plan.to_queue:
            states[tid] = outcomes.get(tid, T.SUCCESS)
        if plan.run_state is not None:
            return {**states, "<run>": plan.run_state}
    raise AssertionError(f"the run did not finish: {states}")


def test_the_teardown_runs_after_a_failed_work_task_and_the_run_fails() -> None:
    states = settle(setup_work_teardown(), {"run_job": T.FAILED})
    assert states["report"] is T.UPSTREAM_FAILED
    assert states["delete_cluster"] is T.SUCCESS  # it ran: its setup succeeded
    assert states["<run>"] is RunState.FAILED  # the work's failure decides, the teardown's success does not


def test_a_failed_teardown_does_not_fail_the_run() -> None:
    states = settle(setup_work_teardown(), {"delete_cluster": T.FAILED})
    assert states["report"] is T.SUCCESS
    assert states["<run>"] is RunState.SUCCESS


def test_a_failed_setup_leaves_the_teardown_upstream_failed() -> None:
    states = settle(setup_work_teardown(), {"create_cluster": T.FAILED})
    assert states["run_job"] is T.UPSTREAM_FAILED
    assert states["report"] is T.UPSTREAM_FAILED
    assert states["delete_cluster"] is T.UPSTREAM_FAILED
    assert states["<run>"] is RunState.FAILED


def test_a_work_task_in_a_failed_setups_scope_does_not_run_even_with_all_done() -> None:
    # report (all_done) has create_cluster as an indirect setup: the setup's failure holds it.
    g = setup_work_teardown(pb.TRIGGER_RULE_ALL_DONE)
    assert g.nodes["report"].indirect_setups == {"create_cluster"}
    assert g.nodes["create_cluster"].scope == {"report"}
    states = settle(g, {"create_cluster": T.FAILED})
    assert states["report"] is T.UPSTREAM_FAILED


def test_a_task_waits_for_an_indirect_setup_and_an_incremental_plan_wakes_it() -> None:
    # run_job (always) runs beside the setup; report waits for the setup, not only for run_job.
    g = DagGraph.from_spec(
        dag(
            task("create_cluster", setup=True),
            task("run_job", "create_cluster", trigger_rule=pb.TRIGGER_RULE_ALWAYS),
            task("report", "run_job"),
            task(
                "delete_cluster",
                "create_cluster",
                "report",
                teardown=True,
                trigger_rule=pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS,
            ),
        )
    )
    running = snaps(
        {"create_cluster": T.RUNNING, "run_job": T.SUCCESS, "report": T.NONE, "delete_cluster": T.NONE}
    )
    assert "report" not in plan_run(g, running).to_queue
    done = {**running, **snaps({"create_cluster": T.SUCCESS})}
    assert plan_run(g, done, focus=["create_cluster"]).to_queue == ["report"]
    assert plan_run(g, done).to_queue == ["report"]


def test_the_run_outcome_ignores_teardowns_only() -> None:
    g = setup_work_teardown()
    assert g.leaves == {"report"}
    finished = {"create_cluster": T.SUCCESS, "run_job": T.SUCCESS, "report": T.SUCCESS}
    assert run_outcome(g, {**finished, "delete_cluster": T.FAILED}) is RunState.SUCCESS
    assert run_outcome(g, {**finished, "report": T.FAILED, "delete_cluster": T.SUCCESS}) is RunState.FAILED
    assert run_outcome(g, {**finished, "delete_cluster": T.RUNNING}) is None  # it still waits for it


def test_a_dag_of_only_teardowns_falls_back_to_its_plain_leaves() -> None:
    g = DagGraph.from_spec(dag(task("t", teardown=True, trigger_rule=pb.TRIGGER_RULE_ALL_DONE_SETUP_SUCCESS)))
    assert g.leaves == {"t"}
    assert run_outcome(g, {"t": T.FAILED}) is RunState.FAILED


def test_explain_names_the_indirect_setup_a_task_waits_for() -> None:
    from schedd_core.explain import explain
    from tests.unit.helpers import explain_facts

    g = setup_work_teardown()
    states = {"create_cluster": T.RUNNING, "run_job": T.SUCCESS, "report": T.NONE, "delete_cluster": T.NONE}
    assert explain(g, explain_facts("report", T.NONE), snaps(states)) == [
        "it is in the scope of setup tasks that have not succeeded: create_cluster (running)"
    ]


def test_a_callback_takes_no_arguments() -> None:
    from schedd_core.errors import InvalidArgument
    from schedd_core.spec import validate_spec

    callback = pb.Callback(
        python=pb.PythonCallable(target="m:f", args=[pb.Argument(result=pb.ResultReference(task_id="a"))])
    )
    with pytest.raises(InvalidArgument, match="a callback takes no arguments"):
        validate_spec(dag(task("a", on_failure=[callback])))
