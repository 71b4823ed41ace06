"""Setup and teardown: make a scratch cluster, run a job on it, always remove it.

``delete_cluster`` is the teardown of ``create_cluster``: it runs when the job is done whatever the
job's outcome, as long as the cluster was made; the run's state is the job's, not the teardown's.
``schedctl runs trigger setup_teardown --conf '{"fail": true}'`` makes the job fail: the cluster is
still removed and the run fails. Try it locally with ``schedctl dags test examples/setup_teardown.py``.
"""

from __future__ import annotations

from examples.tasks.cluster import create_cluster, delete_cluster, run_job
from schedd_sdk import dag


@dag(tags=["example"])
def setup_teardown() -> None:
    """Make a scratch cluster, run a job on it, remove it."""
    cluster = create_cluster()
    run_job(cluster) >> delete_cluster(cluster)
