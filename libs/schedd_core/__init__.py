"""The pure core of schedd: states, DAG specs and scheduling decisions.

Nothing in this package performs I/O. Decisions are values computed from
snapshots; the store applies them. That is what lets the core be tested with a
fake clock and no database.
"""
