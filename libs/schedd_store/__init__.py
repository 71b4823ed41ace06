"""The PostgreSQL metadata store: schema migrations, named statements, and the operations built on them.

PostgreSQL is the one source of truth. Statements that enforce an invariant
(fencing, guarded transitions, attempt-conditional reports, SKIP LOCKED claims)
live in ``schedd_store.statements`` (a submodule per area) under names that say what they guarantee.
"""
