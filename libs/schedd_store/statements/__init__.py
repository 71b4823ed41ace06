"""Every SQL statement of schedd that enforces an invariant, by name.

Conventions:
- A state change is one guarded UPDATE: ``WHERE ... state = ANY(:<machine>_sources)``,
  the sources bound when the statement is defined (:func:`_guarded`, which checks each
  source against ``schedd_core.states`` for every target the statement sets), or, for a
  statement whose target is a parameter, ``state = ANY(:allowed_from)`` computed by the
  caller from the same tables. Callers compare the returned rows with what they expected;
  a shortfall is a typed error. ``tests/unit/test_statement_guards.py`` fails on any
  statement that sets a state without such a guard.
- Scheduler writes run inside a transaction that first takes
  ``LOCK_FENCE_FOR_WRITE`` (a shared row lock) and compares the token; writes
  are stamped with that token (``fence_token``).
- Worker reports are conditional on the attempt id they carry.
"""

from schedd_store.statements.auth import *  # noqa: F403
from schedd_store.statements.backfills import *  # noqa: F403
from schedd_store.statements.bundles import *  # noqa: F403
from schedd_store.statements.control import *  # noqa: F403
from schedd_store.statements.dags import *  # noqa: F403
from schedd_store.statements.deletion import *  # noqa: F403
from schedd_store.statements.delivery import *  # noqa: F403
from schedd_store.statements.dispatch import *  # noqa: F403
from schedd_store.statements.fencing import *  # noqa: F403
from schedd_store.statements.guards import GUARDS as GUARDS
from schedd_store.statements.guards import _guarded as _guarded
from schedd_store.statements.guards import _sql as _sql
from schedd_store.statements.occupancy import *  # noqa: F403
from schedd_store.statements.outbox import *  # noqa: F403
from schedd_store.statements.pools import *  # noqa: F403
from schedd_store.statements.requests import *  # noqa: F403
from schedd_store.statements.retention import *  # noqa: F403
from schedd_store.statements.runs import *  # noqa: F403
from schedd_store.statements.schedules import *  # noqa: F403
from schedd_store.statements.scheduling import *  # noqa: F403
from schedd_store.statements.sensors import *  # noqa: F403
