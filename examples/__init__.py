"""Example DAGs. A package, so that workers (which run in the repository root) can import the
Python tasks of the examples as ``examples.tasks.<module>:<function>``."""
