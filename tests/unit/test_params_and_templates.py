"""Typed params (``schedd_sdk.Param``, ``schedd_core.params``) and templated commands
(``schedd_core.templates``): pure logic."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from schedd_core.errors import InvalidArgument
from schedd_core.params import check_run_params
from schedd_core.templates import RenderError, check_template, context, render
from schedd_rpc import convert
from schedd_sdk import DagDefinitionError, Param, dag, shell
from schedd_sdk.dags import DAG


def typed_dag(**params: object) -> DAG:
    @dag(dag_id="typed", params=params)
    def typed() -> None:
        shell("echo {{ params.rows }}", task_id="t")

    return typed()


def test_params_compile_to_defaults_and_schemas() -> None:
    spec = typed_dag(rows=Param(10, type="integer", minimum=1), table=Param(type="string"), note="").to_spec()
    assert dict(spec.params) == {"rows": 10, "note": ""}
    schemas = convert.from_struct(spec.param_schemas)
    assert schemas["rows"] == {"type": "integer", "minimum": 1}
    assert schemas["table"] == {"type": "string", "required": True}


def test_a_default_that_breaks_its_schema_is_an_authoring_error() -> None:
    with pytest.raises(DagDefinitionError, match=r"spec\.params\.rows"):
        typed_dag(rows=Param(0, type="integer", minimum=1)).to_spec()


def test_an_invalid_schema_is_an_authoring_error() -> None:
    with pytest.raises(DagDefinitionError, match=r"spec\.param_schemas\.rows"):
        typed_dag(rows=Param(1, type="whole number")).to_spec()


def test_run_params_are_checked_with_the_conf_on_top() -> None:
    spec = typed_dag(rows=Param(10, type="integer", minimum=1), table=Param(type="string"), extra=0).to_spec()
    check_run_params(spec, {"table": "t"})
    check_run_params(spec, {"table": "t", "rows": 2, "extra": [1]})  # a param without a schema: anything
    with pytest.raises(InvalidArgument, match=r"conf\.table: is required"):
        check_run_params(spec, {})
    with pytest.raises(InvalidArgument, match=r"conf\.rows: 0 is less than the minimum of 1"):
        check_run_params(spec, {"table": "t", "rows": 0})
    with pytest.raises(InvalidArgument, match=r"conf\.table: 3 is not of type 'string'"):
        check_run_params(spec, {"table": 3})


def test_nested_values_name_the_path() -> None:
    spec = typed_dag(ids=Param([1], type="array", items={"type": "integer"})).to_spec()
    with pytest.raises(InvalidArgument, match=r"conf\.ids\[1\]"):
        check_run_params(spec, {"ids": [1, "two"]})


WHEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def values(**params: object) -> dict[str, object]:
    return context(
        dag_id="d",
        run_id="r",
        task_id="t",
        try_number=2,
        logical_date=WHEN,
        data_interval=None,
        params=params,
    )


def test_a_template_is_rendered_with_the_runs_context() -> None:
    text = "{{ ds }} {{ ds_nodash }} {{ run_id }} {{ try_number }} {{ params.x | shell_quote }}"
    assert render(text, values(x="a b")) == "2026-03-04 20260304 r 2 'a b'"


def test_unknown_names_and_python_internals_fail_to_render() -> None:
    with pytest.raises(RenderError, match="nope"):
        render("{{ nope }}", values())
    with pytest.raises(RenderError):
        render("{{ ''.__class__.__mro__ }}", values())


def test_template_syntax_is_checked_naming_the_field() -> None:
    check_template("spec.tasks[0].shell.command", "echo plain {not a template}")
    with pytest.raises(InvalidArgument, match=r"spec\.tasks\[0\]\.shell\.command: template syntax error"):
        check_template("spec.tasks[0].shell.command", "echo {{ params.x")
