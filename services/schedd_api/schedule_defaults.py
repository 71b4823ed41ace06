"""The deployment's default meaning of a plain cron ``schedule`` string, applied at registration.

``SCHEDD_CREATE_CRON_DATA_INTERVALS`` (Airflow's ``[scheduler] create_cron_data_intervals``):
``true`` (schedd's default) reads ``"0 3 * * *"`` as a CronDataIntervalTimetable, ``false`` (Airflow
3's default) as a CronTriggerTimetable. It is read at each registration (and check) and written into
the stored spec's ``cron_semantics``, so changing it changes DAGs registered afterwards only; the
leader never reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from schedd.v1 import resources_pb2 as pb
from schedd_core.timetable_spec import resolve_cron_semantics

ENV = "SCHEDD_CREATE_CRON_DATA_INTERVALS"
_VALUES = {
    "1": True,
    "true": True,
    "yes": True,
    "on": True,
    "0": False,
    "false": False,
    "no": False,
    "off": False,
}


def create_cron_data_intervals(environ: Mapping[str, str] = os.environ) -> bool:
    """The setting (True when unset); ValueError naming the variable for anything but a boolean."""
    value = environ.get(ENV, "true").strip().lower()
    if value not in _VALUES:
        raise ValueError(f"{ENV}={environ[ENV]!r}: use true or false")
    return _VALUES[value]


def with_default_cron_semantics(spec: pb.DagSpec) -> pb.DagSpec:
    """``spec`` with a plain cron string's meaning fixed by the deployment's setting."""
    return resolve_cron_semantics(spec, create_cron_data_intervals=create_cron_data_intervals())
