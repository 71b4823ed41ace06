"""The ``schedctl`` command line: ``schedctl --help`` lists the commands.

Exit codes: 0 success; 1 a waited-for run (or backfill) failed; 2 the request was rejected (bad
input, not found, ...); 3 the api could not be reached.
"""

from __future__ import annotations

import sys

from schedctl import backfills, cluster, dags, runs, tasks  # noqa: F401  (each registers its commands)
from schedctl.cli import app


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
