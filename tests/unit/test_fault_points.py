"""The fault-point protocol as a test sees it: a point fires once, and its marker is never read empty."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from schedd_devstack.faults import arm
from schedd_faults.points import FaultPoints, InjectedFault


def test_an_armed_point_fires_once_and_names_the_process(tmp_path: Path) -> None:
    points = FaultPoints(tmp_path)
    marker = arm(tmp_path, "store.commit", "fail")
    with pytest.raises(InjectedFault):
        points.hit("store.commit")
    points.hit("store.commit")  # disarmed: passes
    assert marker.read_text() == str(os.getpid())


def test_the_marker_exists_only_with_its_pid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test polls for the marker and reads it at once (``int(marker.read_text())``). Every file the
    fault point writes is created empty first, as ``open`` does; at that moment the marker must not
    exist yet, else the poller reads an empty pid."""
    marker = arm(tmp_path, "deadlines.detected", "sleep 0")
    seen_empty: list[str] = []
    original = Path.write_text

    def write_as_open_does(self: Path, data: str, *args: object, **kwargs: object) -> int:
        self.touch()
        if marker.exists() and marker.read_text() == "":
            seen_empty.append(str(self))
        return original(self, data)

    monkeypatch.setattr(Path, "write_text", write_as_open_does)
    FaultPoints(tmp_path).hit("deadlines.detected")
    assert seen_empty == []
    assert marker.read_text() == str(os.getpid())
