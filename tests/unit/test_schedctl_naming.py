"""How schedctl names runs and dates and reads its options, against an in-process fake api
(``tests.unit.fake_schedctl_api``): ``DAG/@latest`` in every command that names a run (resolved
once, and said, by the commands that change a run), date-only range ends that take in their whole
day in the DAG's time zone, a backfill's conf and ``--latest-version``, ``-o`` after every
command, and help text that is re-flowed, without value placeholders on flags."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import typer

from schedctl.cli import EXIT_REJECTED, app
from schedd.v1 import api_pb2
from tests.unit.fake_schedctl_api import LATEST, FakeApi, invoke, serve

Api = tuple[str, FakeApi]
MICROSECOND = timedelta(microseconds=1)


@pytest.fixture(scope="module")
def api() -> Iterator[Api]:
    yield from serve()


def sent(api: Api, kind: type) -> list[Any]:
    return [r for r in api[1].requests if isinstance(r, kind)]


@pytest.mark.parametrize(
    ("command", "kind", "field"),
    [
        (("runs", "cancel", "fan/@latest"), api_pb2.CancelRunRequest, "name"),
        (("runs", "delete", "fan/@latest", "--yes"), api_pb2.DeleteRunRequest, "name"),
        (("tasks", "clear", "fan/@latest", "t"), api_pb2.ClearTaskInstancesRequest, "parent"),
        (
            ("tasks", "mark-success", "dags/fan/runs/@latest", "t"),
            api_pb2.SetTaskInstanceStateRequest,
            "name",
        ),
        (("tasks", "mark-failed", "fan/@latest", "t"), api_pb2.SetTaskInstanceStateRequest, "name"),
    ],
)
def test_a_command_that_changes_a_run_acts_on_the_newest_run_and_says_which(
    api: Api, command: tuple[str, ...], kind: type, field: str
) -> None:
    done = invoke(api, *command)
    assert done.exit_code == 0, done.output
    (request,) = sent(api, kind)
    assert getattr(request, field).startswith(LATEST), "the run resolved once, before the change"
    assert f"is {LATEST}" in done.stderr


def test_help_names_latest_wherever_a_run_is_named(api: Api) -> None:
    for command in (
        ("runs", "cancel"),
        ("tasks", "clear"),
        ("tasks", "mark-success"),
        ("tasks", "logs"),
        ("tasks", "result"),
        ("explain",),
    ):
        shown = invoke(api, *command, "--help")
        assert "@latest" in shown.stdout, command


BERLIN_MIDNIGHT_JULY_1 = datetime(2024, 6, 30, 22, tzinfo=UTC)


def test_a_date_only_end_takes_in_its_whole_day_and_a_date_time_is_itself(api: Api) -> None:
    cases = [
        ("nightly", "2024-06-30", BERLIN_MIDNIGHT_JULY_1 - MICROSECOND),
        ("plain", "2024-06-30", datetime(2024, 7, 1, tzinfo=UTC) - MICROSECOND),
        ("nightly", "2024-06-30T02:30", datetime(2024, 6, 30, 0, 30, tzinfo=UTC)),
        ("nightly", "2024-06-30T00:00:00Z", datetime(2024, 6, 30, tzinfo=UTC)),
    ]
    for dag_id, end, expected_end in cases:
        done = invoke(api, "backfill", "create", dag_id, "--start", "2024-06-01", "--end", end)
        assert done.exit_code == 0, done.output
        (request,) = sent(api, api_pb2.CreateBackfillRequest)
        assert request.backfill.end_date.ToDatetime(UTC) == expected_end, end
        start = (
            datetime(2024, 5, 31, 22, tzinfo=UTC) if dag_id == "nightly" else datetime(2024, 6, 1, tzinfo=UTC)
        )
        assert request.backfill.start_date.ToDatetime(UTC) == start
    done = invoke(api, "backfill", "create", "nightly", "--start", "2024-06-01", "--end", "June")
    assert done.exit_code == EXIT_REJECTED and "--end 'June'" in done.output


def test_runs_list_reads_dates_in_the_dags_zone_and_a_date_only_until_takes_in_the_day(api: Api) -> None:
    done = invoke(api, "runs", "list", "nightly", "--since", "2024-06-01", "--until", "2024-06-30")
    assert done.exit_code == 0, done.output
    (request,) = sent(api, api_pb2.ListRunsRequest)
    assert request.logical_date_from.ToDatetime(UTC) == datetime(2024, 5, 31, 22, tzinfo=UTC)
    assert request.logical_date_until.ToDatetime(UTC) == BERLIN_MIDNIGHT_JULY_1
    done = invoke(api, "runs", "list", "--until", "2024-06-30T12:00:00Z")
    (request,) = sent(api, api_pb2.ListRunsRequest)
    assert request.logical_date_until.ToDatetime(UTC) == datetime(2024, 6, 30, 12, tzinfo=UTC)


@pytest.mark.parametrize(
    ("conf", "message"), [("[1]", "--conf must be a JSON object"), ("{", "--conf is not valid JSON")]
)
def test_a_bad_backfill_conf_is_refused_naming_the_option(api: Api, conf: str, message: str) -> None:
    done = invoke(
        api, "backfill", "create", "n", "--start", "2024-06-01", "--end", "2024-06-30", "--conf", conf
    )
    assert done.exit_code == EXIT_REJECTED, done.output
    assert message in done.output
    assert not sent(api, api_pb2.CreateBackfillRequest)


def test_backfill_create_sends_its_conf_and_latest_version(api: Api) -> None:
    args = ("backfill", "create", "plain", "--start", "2024-06-01", "--end", "2024-06-02")
    done = invoke(api, *args, "--conf", '{"rows": 10, "mode": "full"}', "--latest-version")
    assert done.exit_code == 0, done.output
    (request,) = sent(api, api_pb2.CreateBackfillRequest)
    assert request.backfill.HasField("conf")
    assert dict(request.backfill.conf) == {"rows": 10, "mode": "full"}
    assert request.backfill.run_on_latest_version
    done = invoke(api, *args)
    (request,) = sent(api, api_pb2.CreateBackfillRequest)
    assert not request.backfill.HasField("conf") and not request.backfill.run_on_latest_version


def test_a_dry_run_says_it_is_one_and_what_it_would_do(api: Api) -> None:
    done = invoke(
        api, "backfill", "create", "plain", "--start", "2024-06-01", "--end", "2024-06-01", "--dry-run"
    )
    assert done.exit_code == 0, done.output
    text = " ".join(done.stdout.split())
    assert "dry run, nothing stored" in text and "would go through 1 interval" in text
    assert "running" not in text


def _leaf_commands() -> Iterator[tuple[str, Any]]:
    def walk(command: Any, path: str) -> Iterator[tuple[str, Any]]:
        subcommands = getattr(command, "commands", None)
        if subcommands:
            for name, sub in subcommands.items():
                yield from walk(sub, f"{path} {name}".strip())
        else:
            yield path, command

    yield from walk(typer.main.get_command(app), "")


def test_every_command_takes_output_after_it(api: Api) -> None:
    leaves = dict(_leaf_commands())
    assert {"tasks logs", "dags diff", "config use-context", "runs delete"} <= set(leaves)
    lacking = [path for path, command in leaves.items() if not any("-o" in p.opts for p in command.params)]
    assert lacking == []
    done = invoke(api, "tasks", "logs", "fan/r1", "t", "-o", "json")
    assert done.exit_code == 0, done.output
    assert done.stdout == "out\n"


@pytest.mark.parametrize(
    "command",
    [("dags", "register"), ("runs", "trigger"), ("tasks", "logs"), ("backfill", "create"), ("runs", "list")],
)
def test_help_is_reflowed_and_flags_have_no_placeholder(api: Api, command: tuple[str, ...]) -> None:
    shown = invoke(api, *command, "--help")
    assert shown.exit_code == 0, shown.output
    assert "<bool>" not in shown.stdout
    lines = [line.rstrip() for line in shown.stdout.splitlines()]
    usage = lines.index(next(line for line in lines if line.startswith("Usage:")))
    end = next(i for i, line in enumerate(lines) if line in ("Arguments:", "Options:"))
    description = lines[usage + 1 : end]
    for line, following in itertools.pairwise(description):
        if line and following:
            room = 80 - len(line) - 1
            assert len(following.split()[0]) > room, f"{line!r} is cut before {following!r}"
