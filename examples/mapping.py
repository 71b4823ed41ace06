"""Dynamic task mapping: one task instance per file that landed, then a total over all of them.

As in Airflow, ``count_rows.partial(header=True).expand(path=files)`` becomes, once ``list_files``
has run, one instance of ``count_rows`` per path it returned (``count_rows[0]``, ``count_rows[1]``,
...), each called with ``header=True`` and its own ``path``; ``retries=2`` given to ``partial`` is
each instance's. ``summarise(counts)`` gets the list of every instance's count (a reduce), and
``notify`` expands over a literal list, one instance per channel, each with the total.

Try it from the repository root: ``schedctl dags test examples/mapping.py``.
"""

from __future__ import annotations

from examples.tasks.files import count_rows, list_files, notify, summarise
from schedd_sdk import dag


@dag(tags=["example", "mapping"])
def mapping() -> None:
    """Count the rows of each file that landed, add them up, announce the total."""
    files = list_files()
    counts = count_rows.partial(header=True, retries=2).expand(path=files)
    total = summarise(counts)
    notify.partial(rows=total).expand(channel=["email", "chat"])
