"""Deadline alerts, as Airflow 3.1 writes them: ``DAG(..., deadline=DeadlineAlert(...))``.

``DeadlineAlert(reference=DeadlineReference.DAGRUN_LOGICAL_DATE, interval=timedelta(hours=1),
callback=Callback.webhook(...))`` says "a run must finish within an hour after its logical date";
``DeadlineReference.DAGRUN_QUEUED_AT`` counts from when the run was queued (created). A run still
unfinished at its deadline has missed it: the leader records the miss once (``schedctl runs get``
shows it) and delivers the callbacks (event ``deadline_missed``) at least once.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from google.protobuf import duration_pb2

from schedd.v1 import alerts_pb2, resources_pb2 as pb
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.options import Callback, CallbackLike, DurationLike, to_callback, to_timedelta


class DeadlineReference(enum.Enum):
    DAGRUN_LOGICAL_DATE = alerts_pb2.DEADLINE_REFERENCE_LOGICAL_DATE
    DAGRUN_QUEUED_AT = alerts_pb2.DEADLINE_REFERENCE_QUEUED_AT


@dataclass(frozen=True, init=False)
class DeadlineAlert:
    reference: DeadlineReference
    interval: timedelta
    callbacks: tuple[Callback, ...]

    def __init__(
        self,
        reference: DeadlineReference,
        interval: DurationLike,
        callback: CallbackLike | Sequence[CallbackLike] = (),
    ) -> None:
        if not isinstance(reference, DeadlineReference):
            raise DagDefinitionError(f"DeadlineAlert: reference {reference!r} is not a DeadlineReference")
        try:
            delta = to_timedelta(interval)
        except (TypeError, ValueError) as exc:
            raise DagDefinitionError(f"DeadlineAlert: interval {interval!r}: {exc}") from None
        if delta <= timedelta(0):
            raise DagDefinitionError("DeadlineAlert: interval must be positive")
        items = (
            list(callback) if isinstance(callback, Sequence) and not isinstance(callback, str) else [callback]
        )
        object.__setattr__(self, "reference", reference)
        object.__setattr__(self, "interval", delta)
        object.__setattr__(self, "callbacks", tuple(to_callback(c, "DeadlineAlert: callback") for c in items))

    def to_proto(self) -> pb.DeadlineAlert:
        interval = duration_pb2.Duration()
        interval.FromTimedelta(self.interval)
        return pb.DeadlineAlert(
            reference=self.reference.value,
            interval=interval,
            callbacks=[c.to_proto() for c in self.callbacks],
        )
