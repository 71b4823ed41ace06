"""The task functions the benchmarks run."""


def noop() -> None:
    """Does nothing: the benchmarks measure schedd, not the task."""


def elements(count: int) -> list[int]:
    """The list a mapped task expands over: ``0 .. count-1``."""
    return list(range(count))


def noop_element(x: int) -> None:
    """A mapped instance that does nothing with its element."""


def count_results(values: list[None]) -> int:
    """The reduce over a mapped task's results."""
    return len(values)
