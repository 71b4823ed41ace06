"""The test side of the fault points of :mod:`schedd_faults.points`: arming a point in the directory a
service process was started with (``SCHEDD_FAULTS``).

The protocol (a file per armed point, taken by an atomic rename; a ``.hit`` marker written by the
process that fired) is described in :mod:`schedd_faults.points`; this module only writes the file.
"""

from __future__ import annotations

import os
from pathlib import Path


def arm(directory: str | os.PathLike[str], point: str, action: str) -> Path:
    """Arm ``point`` in ``directory`` with ``action`` (for tests); returns the marker path that
    appears once the point fires."""
    path = Path(directory)
    path.mkdir(parents=True, exist_ok=True)
    staging = path / f".{point}.arming"
    staging.write_text(action)
    os.rename(staging, path / point)
    return path / f"{point}.hit"
