"""The web service's parts without a browser or a cluster: sessions, the trigger form's reading of
typed params, redirects after sign-in, event framing, the grid, and the sharing of run watches."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import UTC, datetime
from typing import Any

import grpc
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request
from google.protobuf import json_format

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_web import forms, grid, pages_runs, present, shapes
from schedd_web.api import ApiError
from schedd_web.config import WebConfig
from schedd_web.live import RunHub
from schedd_web.metrics import WebMetrics
from schedd_web.security import require_session, safe_next
from schedd_web.sessions import SessionStore
from schedd_web.sse import with_pauses


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_sessions_expire_when_idle_or_old_and_the_oldest_goes_when_full() -> None:
    clock = Clock()
    store = SessionStore(idle_seconds=10, max_age_seconds=25, max_sessions=2, clock=clock)
    session = store.create("sdt_a_b", "viewer", "alice")
    assert len(session.id) >= 40 and session.csrf != session.id
    clock.now += 9
    assert store.get(session.id) is session  # used: its idle time starts over
    clock.now += 9
    assert store.get(session.id) is session
    clock.now += 8  # 26 s after sign-in: too old, though used 8 s ago
    assert store.get(session.id) is None
    idle = store.create("t", "viewer", "bob")
    clock.now += 11
    assert store.get(idle.id) is None

    first, second = store.create("t1", "viewer", "a"), store.create("t2", "viewer", "b")
    store.get(first.id)  # second is now the least recently used
    third = store.create("t3", "viewer", "c")
    assert store.get(second.id) is None and store.get(first.id) is first and store.get(third.id) is third
    store.delete(first.id)
    assert store.get(first.id) is None


def test_csrf_tokens_are_compared_whole() -> None:
    session = SessionStore(idle_seconds=10, max_age_seconds=10).create("t", "operator", "x")
    assert session.csrf_matches(session.csrf)
    assert not session.csrf_matches(session.csrf[:-1])
    assert not session.csrf_matches("")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("/dags/x/grid?y=1", "/dags/x/grid?y=1"),
        ("//evil.example/", "/"),
        ("https://evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("javascript:alert(1)", "/"),
        ("", "/"),
    ],
)
def test_sign_in_only_sends_the_browser_to_this_site(target: str, expected: str) -> None:
    assert safe_next(target) == expected


SPEC = json_format.ParseDict(
    {
        "dag_id": "p",
        "params": {"rows": 5, "mode": "fast", "flag": True, "ratio": 0.5, "tags": ["a"]},
        "param_schemas": {
            "rows": {"type": "integer", "minimum": 1, "description": "how many"},
            "mode": {"enum": ["fast", "slow"]},
            "needed": {"type": "string", "required": True},
        },
        "tasks": [{"task_id": "t", "shell": {"command": "true"}}],
    },
    pb.DagSpec(),
)


def test_the_trigger_form_is_made_from_the_typed_params() -> None:
    fields = {f.name: f for f in forms.param_fields(SPEC)}
    assert {n: f.kind for n, f in fields.items()} == {
        "flag": "boolean",
        "mode": "enum",
        "needed": "string",
        "ratio": "number",
        "rows": "integer",
        "tags": "json",
    }
    assert fields["rows"].value == "5" and fields["rows"].description == "how many"
    assert fields["mode"].choices == ['"fast"', '"slow"'] and fields["mode"].value == '"fast"'
    assert fields["needed"].required and not fields["needed"].has_default
    assert fields["tags"].value == '["a"]'


def test_typed_values_are_read_as_their_type_and_bad_ones_are_named() -> None:
    fields = forms.param_fields(SPEC)
    form = {
        "param.rows": "7",
        "param.mode": '"slow"',
        "param.flag": "false",
        "param.ratio": "2",
        "param.needed": "",
    }
    assert forms.read_conf(fields, form) == {"rows": 7, "mode": "slow", "flag": False, "ratio": 2}
    assert not forms.has_errors(fields)

    fields = forms.param_fields(SPEC)
    conf = forms.read_conf(fields, {"param.rows": "1.5", "param.tags": "[oops", "param.flag": "yes"})
    errors = {f.name: f.error for f in fields if f.error}
    assert conf == {} and set(errors) == {"rows", "tags", "flag"}
    assert "whole number" in errors["rows"] and "JSON" in errors["tags"] and "true or false" in errors["flag"]


def test_the_apis_field_errors_go_next_to_their_fields() -> None:
    fields = forms.param_fields(SPEC)
    rest = forms.attach_api_errors(
        fields, {"conf.rows": "0 is less than the minimum of 1", "conf.tags[0]": "bad", "run_id": "taken"}
    )
    by_name = {f.name: f.error for f in fields}
    assert by_name["rows"] == "conf.rows: 0 is less than the minimum of 1"
    assert by_name["tags"] == "conf.tags[0]: bad"
    assert rest == {"run_id": "taken"}


def _run(run_id: str, states: dict[str, str], mapped: dict[str, list[str]] | None = None) -> pb.DagRun:
    run = pb.DagRun(name=f"dags/d/runs/{run_id}", dag_id="d", run_id=run_id, state=pb.RUN_STATE_RUNNING)
    for task_id, state in states.items():
        run.task_instances.add(task_id=task_id, state=pb.TaskState.Value(f"TASK_STATE_{state}"), map_index=-1)
    for task_id, mapped_states in (mapped or {}).items():
        for index, state in enumerate(mapped_states):
            run.task_instances.add(
                task_id=task_id, state=pb.TaskState.Value(f"TASK_STATE_{state}"), map_index=index
            )
    return run


def test_the_grid_orders_tasks_after_their_upstream_and_counts_mapped_instances() -> None:
    spec = json_format.ParseDict(
        {
            "dag_id": "d",
            "tasks": [
                {"task_id": "z_last", "upstream": ["m"], "shell": {"command": "true"}},
                {"task_id": "m", "upstream": ["a_first"], "shell": {"command": "true"}},
                {"task_id": "a_first", "shell": {"command": "true"}},
            ],
        },
        pb.DagSpec(),
    )
    newest = _run("r2", {"a_first": "RUNNING"})
    oldest = _run(
        "r1",
        {"a_first": "SUCCESS", "z_last": "NONE", "gone": "REMOVED"},
        {"m": ["SUCCESS", "FAILED", "SUCCESS"]},
    )
    columns, rows = grid.build(spec, [newest, oldest])
    assert [c.run.run_id for c in columns] == ["r1", "r2"]
    assert [r.task_id for r in rows] == ["a_first", "m", "z_last", "gone"]
    mapped = rows[1].cells[0]
    assert mapped is not None and mapped.mapped and mapped.state == "failed" and mapped.text == "2✓ 1✗"
    assert rows[1].cells[1] is None
    running = rows[0].cells[1]
    assert (
        running is not None and running.state == "running" and running.url == "/dags/d/runs/r2/tasks/a_first"
    )


class FakeApi:
    """Answers GetRun with the newest state and streams the states the test puts in per watch."""

    def __init__(self) -> None:
        self.runs = self
        self.watches = 0
        self.open = 0
        self.feed: asyncio.Queue[pb.DagRun] = asyncio.Queue()
        self.allowed = {"viewer-1", "viewer-2"}

    async def GetRun(self, request: Any, token: str) -> pb.DagRun:
        return _run("r", {"a": "RUNNING"})

    async def call(self, method: Any, request: Any, token: str) -> Any:
        if token not in self.allowed:
            raise ApiError(grpc.StatusCode.PERMISSION_DENIED, "no")
        return await method(request, token)

    async def watch_run(self, name: str, token: str) -> AsyncIterator[pb.DagRun]:
        self.watches += 1
        self.open += 1
        try:
            while True:
                run = await self.feed.get()
                yield run
                if run.state == pb.RUN_STATE_SUCCESS:
                    return
        finally:
            self.open -= 1


async def test_viewers_of_one_run_share_one_upstream_watch() -> None:
    """Two pages of one run make one WatchRun; both get its changes; a token that may not read the
    run gets the refusal and no subscription; the watch closes with its last viewer."""
    api = FakeApi()
    hub = RunHub(api, WebMetrics())  # type: ignore[arg-type]
    async with (
        hub.subscribe("dags/d/runs/r", "viewer-1") as one,
        hub.subscribe("dags/d/runs/r", "viewer-2") as two,
    ):
        assert (await one.next(1)) is not None and (await two.next(1)) is not None  # their own GetRun
        with pytest.raises(ApiError):
            async with hub.subscribe("dags/d/runs/r", "stranger"):
                pass
        await api.feed.put(_run("r", {"a": "SUCCESS"}))
        first, second = await one.next(5), await two.next(5)
        assert first is not None and second is not None
        assert first.task_instances[0].state == pb.TASK_STATE_SUCCESS == second.task_instances[0].state
        assert api.watches == 1 and hub.watching == 1
    await asyncio.sleep(0)  # let the cancelled watch unwind
    for _ in range(100):
        if api.open == 0:
            break
        await asyncio.sleep(0.01)
    assert hub.watching == 0 and api.open == 0


def test_a_mocked_request_is_refused_without_a_session() -> None:
    """A page needs a session: without one the browser goes to the sign-in page and comes back."""
    request = make_mocked_request("GET", "/dags?q=x")
    with pytest.raises(web.HTTPSeeOther) as refused:
        require_session(request)
    assert refused.value.location == "/signin?next=%2Fdags%3Fq%3Dx"


async def test_event_streams_pause_for_keepalives_and_close_their_source() -> None:
    """A quiet source yields None each interval (a keepalive is sent then); leaving the loop early
    closes the source (its upstream call is cancelled)."""
    gate = asyncio.Event()
    closed = asyncio.Event()

    async def source() -> AsyncGenerator[str, None]:
        try:
            yield "first"
            await gate.wait()
            yield "second"
            await asyncio.Event().wait()  # quiet forever
            yield "never"
        finally:
            closed.set()

    seen: list[str | None] = []
    async with contextlib.aclosing(with_pauses(source(), 0.01)) as items:
        async for item in items:
            seen.append(item)
            if item is None and not gate.is_set():
                gate.set()
            if item == "second":
                break
    assert seen[0] == "first" and None in seen and seen[-1] == "second"
    assert closed.is_set()


def test_the_graph_puts_each_task_right_of_its_upstream_and_the_gantt_scales_to_the_run() -> None:
    spec = json_format.ParseDict(
        {
            "dag_id": "d",
            "tasks": [
                {"task_id": "c", "upstream": ["a", "b"], "shell": {"command": "true"}},
                {"task_id": "b", "upstream": ["a"], "shell": {"command": "true"}},
                {"task_id": "a", "shell": {"command": "true"}},
            ],
        },
        pb.DagSpec(),
    )
    run = _run("r", {"a": "SUCCESS", "b": "RUNNING", "c": "NONE"})
    run.task_instances[0].start_time.FromSeconds(100)
    run.task_instances[0].end_time.FromSeconds(110)
    run.task_instances[1].start_time.FromSeconds(110)
    laid = shapes.graph(spec, run)
    x = {n.task_id: n.x for n in laid.nodes}
    assert x["a"] < x["b"] < x["c"]
    assert {n.task_id: n.state for n in laid.nodes} == {"a": "success", "b": "running", "c": "none"}
    assert len(laid.edges) == 3 and all(e.x1 < e.x2 for e in laid.edges)

    bars, height = shapes.gantt(run, now=datetime.fromtimestamp(120, UTC))
    assert [b.label for b in bars] == ["a", "b"] and height > 0
    assert bars[0].x == shapes.LABEL_WIDTH and bars[1].x == shapes.LABEL_WIDTH + shapes.CHART_WIDTH // 2
    assert bars[1].width == shapes.CHART_WIDTH // 2  # still running: up to now


async def test_the_clear_confirmation_counts_the_instances_a_clear_resets() -> None:
    """A task's key covers all its mapped instances, ``task[i]`` one of them; no key means every
    task; only_failed keeps the failed and upstream_failed ones."""
    run = _run(
        "r", {"a": "FAILED", "b": "UPSTREAM_FAILED", "c": "SUCCESS"}, {"m": ["SUCCESS", "FAILED", "RUNNING"]}
    )
    request = make_mocked_request("GET", "/")

    async def keys(task_ids: list[str], only_failed: bool = False) -> list[str]:
        found = await pages_runs.clear_preview(
            request, run, task_ids, downstream=False, only_failed=only_failed, token="t"
        )
        return sorted(present.key_of(t) for t in found)

    assert await keys(["m[1]"]) == ["m[1]"]
    assert await keys(["m"]) == ["m[0]", "m[1]", "m[2]"]
    assert await keys(["m", "c"], only_failed=True) == ["m[1]"]
    assert await keys([], only_failed=True) == ["a", "b", "m[1]"]


def test_settings_are_read_and_a_bad_one_is_named() -> None:
    config = WebConfig.from_env(
        {"SCHEDD_WEB_SESSION_IDLE": "60", "SCHEDD_WEB_SECURE_COOKIES": "true"},
        listen="127.0.0.1:0",
        api="127.0.0.1:1",
        metrics_listen="",
    )
    assert config.idle_seconds == 60 and config.cookie_secure and not config.tls
    bad = [
        ({"SCHEDD_WEB_SESSION_IDLE": "soon"}, "SCHEDD_WEB_SESSION_IDLE"),
        ({"SCHEDD_WEB_SESSION_MAX_AGE": "-1"}, "SCHEDD_WEB_SESSION_MAX_AGE"),
        ({"SCHEDD_WEB_SECURE_COOKIES": "maybe"}, "SCHEDD_WEB_SECURE_COOKIES"),
        ({"SCHEDD_WEB_TLS_CERT_FILE": "cert.pem"}, "SCHEDD_WEB_TLS_KEY_FILE"),
    ]
    for env, variable in bad:
        with pytest.raises(InvalidArgument) as refused:
            WebConfig.from_env(env, listen="127.0.0.1:0", api="127.0.0.1:1", metrics_listen="")
        assert refused.value.field == variable
