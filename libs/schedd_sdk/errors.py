"""Errors of the authoring SDK.

Every error the SDK raises on purpose is a :class:`schedd_core.errors.ScheddError`:

* :class:`DagDefinitionError` -- a mistake in the code that declares a DAG (a nested task
  function, a non-task argument, an unknown option, an edge between two DAGs). It is raised
  where the mistake is made, so the traceback points at the offending line.
* :class:`DagValidationError` -- the finished spec breaks a rule the server enforces (a cycle,
  a bad id, a negative option). It is the server's own :class:`InvalidArgument`, raised
  locally by :meth:`schedd_sdk.DAG.to_spec`, with the DAG and, where the field names a task by
  index, the task id added to the message.
* :class:`DagLoadError` -- a DAG file could not be loaded; the message starts with the path.
"""

from __future__ import annotations

from schedd_core.errors import InvalidArgument, ScheddError


class DagDefinitionError(ScheddError):
    """The code that declares a DAG is wrong; the message says what to do instead."""


class DagValidationError(InvalidArgument):
    """A DAG's spec is rejected by the server's validation (``schedd_core.spec.validate_spec``).

    ``field`` and ``problem`` are the validator's (``spec.tasks[2].upstream[0]``); the message
    also names the DAG and, for a field of one task, that task's id.
    """

    def __init__(self, dag_id: str, error: InvalidArgument, task_id: str | None = None) -> None:
        super().__init__(error.field, error.problem)
        self.dag_id = dag_id
        self.task_id = task_id
        where = f" (task {task_id!r})" if task_id is not None else ""
        self.args = (f"DAG {dag_id!r}: {error.field}{where}: {error.problem}",)

    def __str__(self) -> str:
        return str(self.args[0])


class DagLoadError(ScheddError):
    """A DAG file could not be loaded: it is missing, raises on import, defines no DAG, defines
    two DAGs with one id, or declares a DAG that is invalid. The message starts with the path."""
