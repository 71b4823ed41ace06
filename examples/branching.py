"""Branching: a branch task picks one of two paths; a join runs after whichever ran.

``choose_path`` returns the id of the task to follow (``full_refresh`` or ``incremental``); the
other path is skipped. ``publish`` has the trigger rule ``none_failed_min_one_success``, so a
skipped path does not skip it. ``schedctl runs trigger branching --conf '{"full": true}'`` takes
the other path.
"""

from __future__ import annotations

from examples.tasks.branching import choose_path, full_refresh, incremental, publish
from schedd_sdk import dag


@dag(tags=["example"])
def branching() -> None:
    """Choose a full or an incremental refresh, then publish."""
    choose_path() >> [full_refresh(), incremental()] >> publish()
