"""Templated shell commands: Jinja in a sandbox, rendered on the worker with the run's context.

A shell command that contains ``{{`` or ``{%`` is a template. Its syntax is checked when the DAG is
registered (INVALID_ARGUMENT naming the command's field); it is rendered by the worker just before
the attempt runs, in Jinja's ``SandboxedEnvironment`` (no access to Python internals, attributes
starting with ``_`` refused) with ``StrictUndefined`` (an unknown name fails the attempt, naming
it, rather than rendering as nothing). The rendered command is written to the attempt's log before
it runs. Context: ``dag_id``, ``run_id``, ``task_id``, ``try_number``, ``logical_date``, ``ds``
(``YYYY-MM-DD``), ``ds_nodash``, ``ts`` (ISO 8601), ``data_interval_start``, ``data_interval_end``
and ``params`` (the DAG's, the task's and the run's conf on top). Values are not shell-quoted: use
``| shell_quote`` (``shlex.quote``) for values that may hold spaces or quotes.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from schedd_core.errors import InvalidArgument

_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.filters["shell_quote"] = lambda value: shlex.quote(str(value))


class RenderError(Exception):
    """A template that could not be rendered; the message says why."""


def is_template(text: str) -> bool:
    return "{{" in text or "{%" in text


def check_template(field: str, text: str) -> None:
    """At registration: a template's syntax is valid."""
    if not is_template(text):
        return
    try:
        _ENV.parse(text)
    except TemplateSyntaxError as exc:
        raise InvalidArgument(field, f"template syntax error on line {exc.lineno}: {exc.message}") from None


def context(
    *,
    dag_id: str,
    run_id: str,
    task_id: str,
    try_number: int,
    logical_date: datetime,
    data_interval: tuple[datetime, datetime] | None,
    params: Mapping[str, Any],
) -> dict[str, Any]:
    """What a template can name (see the module docstring)."""
    start, end = data_interval or (logical_date, logical_date)
    return {
        "dag_id": dag_id,
        "run_id": run_id,
        "task_id": task_id,
        "try_number": try_number,
        "logical_date": logical_date,
        "ds": logical_date.strftime("%Y-%m-%d"),
        "ds_nodash": logical_date.strftime("%Y%m%d"),
        "ts": logical_date.isoformat(),
        "data_interval_start": start,
        "data_interval_end": end,
        "params": dict(params),
    }


def render(text: str, values: Mapping[str, Any]) -> str:
    """The rendered template; RenderError naming what failed."""
    try:
        return _ENV.from_string(text).render(values)
    except TemplateError as exc:
        raise RenderError(f"the command's template could not be rendered: {exc.message or exc}") from None
