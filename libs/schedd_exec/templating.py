"""The command an attempt of a templated shell task runs (``schedd_core.templates``)."""

from __future__ import annotations

from schedd.v1 import worker_pb2
from schedd_core.templates import context, is_template, render
from schedd_rpc import convert


def rendered_command(assignment: worker_pb2.Assignment) -> str:
    """The assignment's shell command, rendered with its run's context when it is a template (every
    value quoted for where it lands); raises ``schedd_core.templates.RenderError`` naming what could
    not be rendered or placed."""
    command = assignment.shell.command
    if not is_template(command):
        return command
    interval = None
    if assignment.HasField("data_interval_start") and assignment.HasField("data_interval_end"):
        interval = (
            convert.from_ts(assignment.data_interval_start),
            convert.from_ts(assignment.data_interval_end),
        )
    values = context(
        dag_id=assignment.dag_id,
        run_id=assignment.run_id,
        task_id=assignment.task_id,
        try_number=assignment.attempt.try_number,
        logical_date=convert.from_ts(assignment.logical_date),
        data_interval=interval,
        params=convert.from_struct(assignment.params) if assignment.HasField("params") else {},
    )
    return render(command, values)
