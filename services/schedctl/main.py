"""The ``schedctl`` command line: ``schedctl --help`` lists the commands.

Exit codes (``schedctl.cli``): 0 success; 1 a waited-for run (or backfill) failed; 2 usage or
rejected input; 3 not found; 4 not authenticated or not allowed; 5 the api could not be reached;
6 a wait timed out.
"""

from __future__ import annotations

import sys

from schedctl import (  # noqa: F401  (each registers its commands)
    access,
    assets,
    authoring,
    backfills,
    cluster,
    dags,
    deletes,
    runs,
    secrets,
    settings,
    tasks,
)
from schedctl.cli import app


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
