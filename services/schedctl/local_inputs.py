"""What ``schedctl dags test`` makes of its ``--conf`` and ``--logical-date``: the run a cluster would make.

* :func:`cluster_conf`: the conf as the api takes it. It travels as a ``google.protobuf.Struct``
  (so its numbers are what the cluster's tasks get: integral ones as integers), may take at most
  ``schedd_core.limits.MAX_CONF_BYTES`` in that form, and must pass the api's own check,
  ``schedd_core.params.check_run_params`` (declared params only unless ``allow_undeclared_conf``,
  the param schemas, the required params). A conf the api refuses is refused with its message.
* :func:`scheduled_interval`: for a DAG with a schedule, the data interval of the scheduled or
  backfill run the cluster makes for the logical date (``schedd_core.timetables``: for a
  data-interval timetable the interval that starts then, for a trigger timetable the one that ends
  at its tick); a date that is no run's logical date is refused, naming the next one that is. The
  DAG's start and end dates are not applied, as a backfill does not apply them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.limits import check_conf_bytes
from schedd_core.params import check_run_params
from schedd_core.timetable_spec import timetable_of
from schedd_core.timetables import MAX_INTERVAL
from schedd_rpc import convert


def cluster_conf(spec: pb.DagSpec, conf: Mapping[str, Any]) -> dict[str, Any]:
    """``conf`` as a run of ``spec`` on a cluster gets it; InvalidArgument as the api refuses it."""
    struct = convert.struct(dict(conf))
    check_conf_bytes(struct.ByteSize())
    value = convert.from_struct(struct)
    check_run_params(spec, value)
    return value


def scheduled_interval(spec: pb.DagSpec, logical_date: datetime) -> tuple[datetime, datetime] | None:
    """The data interval ``(start, end)``, in UTC, of the run of ``spec``'s schedule whose logical date
    is ``logical_date``; None for a DAG without a schedule. InvalidArgument naming
    ``--logical-date`` when no run has that logical date."""
    timetable = timetable_of(spec)
    if timetable.kind == "none":
        return None
    moment = logical_date.astimezone(UTC)
    first = next(timetable.intervals_between(moment, moment + MAX_INTERVAL), None)
    if first is not None and first.logical_date == moment:
        return first.start, first.end
    following = f"; the next one is {first.logical_date.isoformat()}" if first is not None else ""
    raise InvalidArgument(
        "--logical-date",
        f"{moment.isoformat()} is not the logical date of a run of the DAG's schedule{following}",
    )
