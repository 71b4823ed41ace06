"""``schedctl tasks logs``: a task instance's log, try by try.

Standard output gets the log as stored: each line starts with the UTC time it was written
(``--no-timestamps`` takes the stamps off), and a try that failed ends with a line saying how. Before
a try's log, standard error names it: ``try 2 of 3`` (of the tries the task instance may have).

Without ``-f`` one try is printed, the one asked for or the latest that started, and the exit code is
0 whatever its outcome. With ``-f`` a task instance that has not started yet is waited for, then
followed: without ``--try`` try after try, through its retries, until it is in a final state; with
``--try N`` until try N ends. The exit code then says how it ended: 0 when the task instance
succeeded or was skipped (with ``--try N``: when try N is the try it succeeded with), 1 when it
failed, failed upstream or was removed (with ``--try N``: when try N did not succeed).
"""

from __future__ import annotations

import sys

import grpc
import typer

from schedctl import output
from schedctl.cli import EXIT_RUN_FAILED, call, report, resolved_run_name, run_name, state
from schedctl.instance_rows import key_of
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.limits import MAX_LOG_READ_BYTES
from schedd_core.log_lines import StampRemover

#: Task instance states that last until it is cleared.
FINAL_STATES = frozenset(
    {
        pb.TASK_STATE_SUCCESS,
        pb.TASK_STATE_FAILED,
        pb.TASK_STATE_SKIPPED,
        pb.TASK_STATE_UPSTREAM_FAILED,
        pb.TASK_STATE_REMOVED,
    }
)
SUCCEEDED_STATES = frozenset({pb.TASK_STATE_SUCCESS, pb.TASK_STATE_SKIPPED})


class _Printer:
    """Writes the logs of tries to standard output, a header naming each try to standard error."""

    def __init__(self, key: str, *, timestamps: bool) -> None:
        self._key = key
        self._remover = None if timestamps else StampRemover()
        self._try = 0

    def show(self, logs: api_pb2.TaskLogs) -> None:
        if logs.try_number != self._try:
            self.end_try()
            self._try = logs.try_number
            of = max(logs.max_tries, logs.latest_try, logs.try_number)
            output.err_console.print(f"{self._key}: try {logs.try_number} of {of}", highlight=False)
        self._write(self._remover.feed(logs.data) if self._remover is not None else logs.data)

    def end_try(self) -> None:
        if self._remover is not None:
            self._write(self._remover.flush())

    @staticmethod
    def _write(text: str) -> None:
        if text:
            sys.stdout.write(text)
            sys.stdout.flush()


def print_task_logs(run: str, key: str, *, try_number: int, follow: bool, timestamps: bool) -> None:
    """Print the log of a try of the task instance ``key`` of ``run``; with ``follow``, follow it
    and exit with the code that says how it ended (see the module's doc). Following, ``@latest`` is
    resolved once: a run created meanwhile is not switched to."""
    if follow:
        run = resolved_run_name(run)
    name = f"{run_name(run)}/tasks/{key}"
    request = api_pb2.GetTaskLogsRequest(name=name, try_number=try_number, max_bytes=MAX_LOG_READ_BYTES)
    printer = _Printer(key, timestamps=timestamps)
    try:
        first = state.client.call(state.client.runs.GetTaskLogs, request)
    except grpc.RpcError as exc:
        if not (follow and exc.code() == grpc.StatusCode.NOT_FOUND and _may_still_start(run, key)):
            report(exc)
        output.err_console.print(f"waiting for {key} to start", highlight=False)
    else:
        printer.show(first)
        if not follow:
            _print_the_rest(request, first, printer)
            if first.complete:
                _say_how_it_ended(run, key, first.try_number)
            return
        request.offset = first.next_offset
        request.try_number = first.try_number
    last = _follow(run, key, request, printer, through_retries=try_number == 0)
    if last.state in SUCCEEDED_STATES and last.try_number == last.latest_try:
        return
    raise typer.Exit(EXIT_RUN_FAILED)


def _print_the_rest(request: api_pb2.GetTaskLogsRequest, read: api_pb2.TaskLogs, printer: _Printer) -> None:
    """Read on after ``read``, the answer to ``request``, while answers are full: a long log takes
    several."""
    while read.next_offset - request.offset >= MAX_LOG_READ_BYTES:
        request.offset = read.next_offset
        request.try_number = read.try_number
        found = call(state.client.runs.GetTaskLogs, request)
        assert isinstance(found, api_pb2.TaskLogs)
        read = found
        printer.show(read)
    printer.end_try()


def _follow(
    run: str, key: str, request: api_pb2.GetTaskLogsRequest, printer: _Printer, *, through_retries: bool
) -> api_pb2.TaskLogs:
    """Follow the try ``request`` names (the latest when it names none) to its end, and with
    ``through_retries`` every try after it until the task instance is in a final state; the last
    message read."""
    waiting_for_next = False
    while True:
        last = None
        try:
            for last in state.client.watch_task_logs(request):
                printer.show(last)
        except grpc.RpcError as exc:
            if not (waiting_for_next and exc.code() == grpc.StatusCode.NOT_FOUND):
                report(exc)
            # The task instance reached a final state without running the next try.
            found = call(state.client.runs.GetTaskLogs, api_pb2.GetTaskLogsRequest(name=request.name))
            assert isinstance(found, api_pb2.TaskLogs)
            return found
        assert last is not None and last.complete  # the stream ends with the end of the try
        printer.end_try()
        _say_how_it_ended(run, key, last.try_number)
        if not through_retries or last.state in FINAL_STATES:
            return last
        task_state = output.state_name(pb.TaskState, last.state, "TASK_STATE_")
        output.err_console.print(
            f"{key} is {task_state}: waiting for try {last.try_number + 1}", highlight=False
        )
        request.try_number = last.try_number + 1
        request.offset = 0
        waiting_for_next = True


def _task(run: str, key: str) -> tuple[pb.DagRun, pb.TaskInstance | None]:
    found = call(state.client.runs.GetRun, api_pb2.GetRunRequest(name=run_name(run)))
    assert isinstance(found, pb.DagRun)
    return found, next((t for t in found.task_instances if key_of(t) == key), None)


def _may_still_start(run: str, key: str) -> bool:
    """Whether the task instance has yet to run in a run that has not ended (the api says whether
    it can exist at all)."""
    found, ti = _task(run, key)
    if found.state in (pb.RUN_STATE_SUCCESS, pb.RUN_STATE_FAILED):
        return False
    if ti is None and any(t.task_id == key and t.map_index >= 0 for t in found.task_instances):
        return False  # a mapped task's plain id, once it is expanded: the api's error says so
    return ti is None or ti.state not in FINAL_STATES


def _say_how_it_ended(run: str, key: str, try_number: int) -> None:
    """On standard error: why the latest attempt failed (an import error, an exit code, a timeout)."""
    _, ti = _task(run, key)
    if ti is None or ti.try_number != try_number or not ti.error:
        return
    if ti.state in (pb.TASK_STATE_FAILED, pb.TASK_STATE_UP_FOR_RETRY, pb.TASK_STATE_UPSTREAM_FAILED):
        state_text = output.state_name(pb.TaskState, ti.state, "TASK_STATE_")
        output.err_console.print(f"{key} try {try_number} {state_text}: {ti.error}", highlight=False)
