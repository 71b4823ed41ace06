"""The task functions the benchmarks run."""

import time


def noop() -> None:
    """Does nothing: the benchmarks measure schedd, not the task."""


def nap() -> None:
    """Takes 20 ms: a chain of these keeps a run going for a while with few task instances."""
    time.sleep(0.02)


def doze() -> None:
    """Takes 2 s: the first task of a chain triggered just before a burst, so that its links run
    while the burst does."""
    time.sleep(2.0)


def elements(count: int) -> list[int]:
    """The list a mapped task expands over: ``0 .. count-1``."""
    return list(range(count))


def noop_element(x: int) -> None:
    """A mapped instance that does nothing with its element."""


def count_results(values: list[None]) -> int:
    """The reduce over a mapped task's results."""
    return len(values)
