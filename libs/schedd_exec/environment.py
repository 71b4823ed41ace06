"""The environment a task inherits from the process that runs it.

A task sees the worker's environment (PATH, HOME, locale, its virtualenv) *without* schedd's
own settings: every ``SCHEDD_*`` variable (database URLs, the etcd and registry addresses,
tokens and TLS files, fault points) is removed. What schedd means a task to see it sets for
each attempt (``SCHEDD_DAG_ID``, ``SCHEDD_ATTEMPT_ID``, ...; see ``schedd_exec.assignments``).
Transactional tasks get their database connection from the executor, never from the
environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

OWN_PREFIX = "SCHEDD_"


def inherited_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without schedd's own ``SCHEDD_*`` settings."""
    source = os.environ if environ is None else environ
    return {key: value for key, value in source.items() if not key.startswith(OWN_PREFIX)}
