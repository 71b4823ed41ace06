"""Validation of a task's sensor options (``TaskSpec.sensor``).

A sensor is a Python task (not a branch, not transactional) with a known mode, a positive
``poke_interval`` and, if set, a positive ``timeout``; each bad value is an ``InvalidArgument``
naming its field (``spec.tasks[3].sensor.poke_interval``).
"""

from __future__ import annotations

from schedd.v1 import resources_pb2 as pb
from schedd_core.durations import check_duration
from schedd_core.errors import InvalidArgument

_MODES = frozenset({pb.SENSOR_MODE_UNSPECIFIED, pb.SENSOR_MODE_POKE, pb.SENSOR_MODE_RESCHEDULE})


def check_sensor(where: str, task: pb.TaskSpec) -> None:
    """Raise :class:`InvalidArgument` for the first bad sensor option of ``task`` (at ``where``)."""
    if not task.HasField("sensor"):
        return
    field = f"{where}.sensor"
    if task.WhichOneof("action") != "python":
        raise InvalidArgument(field, "a sensor must be a Python task: its function says whether to go on")
    if task.branch:
        raise InvalidArgument(field, "a branch task cannot be a sensor")
    if task.transactional:
        raise InvalidArgument(field, "a transactional task cannot be a sensor")
    sensor = task.sensor
    if sensor.mode not in _MODES:
        raise InvalidArgument(f"{field}.mode", f"unknown mode {sensor.mode}: use poke or reschedule")
    if not sensor.HasField("poke_interval"):
        raise InvalidArgument(f"{field}.poke_interval", "is required")
    check_duration(f"{field}.poke_interval", sensor.poke_interval, positive=True)
    if sensor.HasField("timeout"):
        check_duration(f"{field}.timeout", sensor.timeout, positive=True)
