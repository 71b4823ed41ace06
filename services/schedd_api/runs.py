"""Triggering runs (the api records the intent; the scheduler materialises and schedules it), and
reading one in the view a request asks for."""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from google.protobuf.message import DecodeError

from schedd.v1 import api_pb2
from schedd_core.clock import Clock
from schedd_core.errors import InvalidArgument
from schedd_core.identifiers import check_id
from schedd_core.limits import check_conf_bytes
from schedd_core.params import check_run_params
from schedd_core.request_key import RequestKey
from schedd_core.states import RunType
from schedd_store import dags, runs
from schedd_store.database import Engine
from schedd_store.records import RunRecord
from schedd_store.schedules import run_id_for
from schedd_telemetry import tracing


async def trigger(
    engine: Engine,
    clock: Clock,
    *,
    dag_id: str,
    run_id: str,
    logical_date: datetime | None,
    conf: dict[str, Any],
    conf_bytes: int,
    request: RequestKey | None,
) -> RunRecord:
    """Create a manual run. ``run_id`` defaults to ``manual__<logical date>`` (see
    :func:`schedd_store.schedules.run_id_for`); ``conf`` may
    take at most ``schedd_core.limits.MAX_CONF_BYTES`` (``conf_bytes``, serialized), may set only the params
    the DAG declares (unless it allows undeclared conf), and the params it gives (the DAG's defaults,
    the conf on top) must fit the DAG's param schemas. With tracing on, the
    run keeps the trace context of the current span (the ``CreateRun`` call's), which the spans of
    its tasks continue."""
    check_conf_bytes(conf_bytes)
    # Against the latest version, which the run is pinned to (a registration in between may pin a
    # newer one; its params were checked against its own schemas' defaults when it was registered).
    with contextlib.suppress(DecodeError):  # a stored spec that cannot be read: the leader fails the run
        check_run_params((await dags.get_dag(engine, dag_id)).spec, conf)
    when = logical_date or clock.now()
    if run_id:
        check_id("run_id", run_id)
    else:
        run_id = run_id_for(RunType.MANUAL, when)
    return await runs.create_run(
        engine,
        dag_id=dag_id,
        run_id=run_id,
        run_type=RunType.MANUAL,
        logical_date=when,
        conf=conf,
        request=request,
        trace_context=tracing.traceparent() if tracing.enabled() else "",
    )


def run_reader(view: int) -> Callable[[Engine, str, str], Awaitable[RunRecord]]:
    """How a run is read in ``view`` (``RunView``); InvalidArgument for a view there is none of."""
    if view in (api_pb2.RUN_VIEW_UNSPECIFIED, api_pb2.RUN_VIEW_FULL):
        return runs.get_run
    if view == api_pb2.RUN_VIEW_SUMMARY:
        return runs.get_run_summary
    raise InvalidArgument("view", f"must be one of RUN_VIEW_FULL and RUN_VIEW_SUMMARY, not {view}")
