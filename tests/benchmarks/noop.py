"""The task functions the benchmarks run."""


def noop() -> None:
    """Does nothing: the benchmarks measure schedd, not the task."""
