"""Templated shell commands: Jinja in a sandbox, rendered on the worker with the run's context.

A shell command that contains ``{{`` or ``{%`` is a template. Its syntax is checked when the DAG is
registered (INVALID_ARGUMENT naming the command's field); it is rendered by the worker just before
the attempt runs, in Jinja's ``SandboxedEnvironment`` (no access to Python internals, attributes
starting with ``_`` refused) with ``StrictUndefined`` (an unknown name fails the attempt, naming
it, rather than rendering as nothing). The rendered command is written to the attempt's log before
it runs. Context: ``dag_id``, ``run_id``, ``task_id``, ``try_number``, ``logical_date``, ``ds``
(``YYYY-MM-DD``), ``ds_nodash``, ``ts`` (ISO 8601), ``data_interval_start``, ``data_interval_end``
and ``params`` (the DAG's, the task's and the run's conf on top).

Values are data, never shell code. The text of every ``{{ ... }}`` expression (a list or a dict as
its ``str`` form) is quoted for the place in the command it lands in
(``schedd_core.shell_placement``): one literal word, or part of one, whatever it holds; a value
where no quoting is safe (a comment, backquotes, ``${ }``, after ``<<``...) fails the attempt,
naming the place. Template text (what ``{% if %}`` and ``{% for %}`` emit) is the author's and is
not quoted. Only the author's template can insert shell text: ``| raw`` inserts its value as it is,
so it belongs on the author's own constants, never on a param (a conf could then run commands).
``| shell_quote`` is kept for older templates: the value is quoted once, where it lands. A value is
never rendered again, so a conf holding ``{{ ... }}`` stays that text
(``tests/security/test_operator_input.py``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from jinja2 import StrictUndefined, TemplateError, TemplateSyntaxError
from jinja2.sandbox import SandboxedEnvironment

from schedd_core.errors import InvalidArgument
from schedd_core.shell_placement import PlacementError, place_values


class ShellText(str):
    """Text the template's author marked (``| raw``) as shell code: inserted as it is."""

    __slots__ = ()


_ENV = SandboxedEnvironment(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
_ENV.filters["raw"] = lambda value: ShellText(value)
_ENV.filters["shell_quote"] = str  # a plain value: quoted once, where it lands


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


class _Values:
    """Jinja's ``finalize`` for one rendering: each expression's text is set aside and replaced
    by a placeholder that holds a random nonce, so no value can forge one."""

    def __init__(self) -> None:
        nonce = secrets.token_hex(8)
        self.prefix = f"SCHEDDVALUE{nonce}N"
        self.placeholder = re.compile(rf"{self.prefix}(\d+)E")
        self.texts: list[str] = []

    def unwrap(self, text: str) -> str:
        """``text`` with the placeholders in it (from a ``{% set %}`` block, a macro) back as
        their values."""
        return self.placeholder.sub(lambda m: self.texts[int(m.group(1))], text)

    def __call__(self, value: Any) -> str:
        if isinstance(value, ShellText):
            return value  # its placeholders, if any, are placed where they land
        self.texts.append(self.unwrap(str(value)))
        return f"{self.prefix}{len(self.texts) - 1}E"


def render(text: str, values: Mapping[str, Any]) -> str:
    """The rendered template, every value quoted where it lands; RenderError naming what failed."""
    collected = _Values()
    try:
        shell = _ENV.overlay(finalize=collected).from_string(text).render(values)
        return place_values(shell, collected.placeholder, collected.texts)
    except TemplateError as exc:
        raise RenderError(f"the command's template could not be rendered: {exc.message or exc}") from None
    except PlacementError as exc:
        raise RenderError(f"the command's template could not be rendered: {exc}") from None
