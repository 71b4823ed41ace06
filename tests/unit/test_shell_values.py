"""Values rendered into shell commands are data (``schedd_core.templates``,
``schedd_core.shell_placement``), and a conf sets only declared params (``schedd_core.params``):
rendered commands are run by a real ``/bin/sh``, and ``schedctl dags test`` by its real executor."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import given, settings, strategies as st
from typer.testing import CliRunner

import schedctl.main  # noqa: F401  (registers every command)
from schedctl.cli import app
from schedd.v1 import resources_pb2 as pb
from schedd_core.errors import InvalidArgument
from schedd_core.params import check_run_params
from schedd_core.templates import RenderError, context, render
from schedd_sdk import dag, shell

PAYLOAD = "x; id; cat /proc/$PPID/environ"
HOSTILE = [
    PAYLOAD,
    "$(id)",
    "`id`",
    "'; id; '",
    '"; id; echo "',
    "a\nid",
    "\\",
    "$'\\x27'",
    "{{ 7 * 7 }}",
    "*",
    "",
    " -n",
]
WHEN = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def values(**params: object) -> dict[str, Any]:
    return context(
        dag_id="d",
        run_id="manual__2026-03-04T05:06:07+00:00",
        task_id="t",
        try_number=1,
        logical_date=WHEN,
        data_interval=None,
        params=params,
    )


def sh(command: str) -> str:
    """What ``/bin/sh -c command`` prints; it must succeed."""
    done = subprocess.run(["/bin/sh", "-c", command], capture_output=True, timeout=10, check=False)
    assert done.returncode == 0, (command, done.stderr)
    return done.stdout.decode()


#: Templates printing one value between brackets, wherever it lands: (template, what it prints).
PLACES = [
    ("printf '[%s]' {{ params.v }}", "[{}]"),
    ("printf '[%s]' pre{{ params.v }}post", "[pre{}post]"),
    ("printf '[%s]' \"in double {{ params.v }} quotes\"", "[in double {} quotes]"),
    ("printf '[%s]' 'in single {{ params.v }} quotes'", "[in single {} quotes]"),
    ("printf '[%s]' \"$(printf '%s' {{ params.v }})\"", "[{}]"),
    ('x="$(printf "%s" "{{ params.v }}")"; printf \'[%s]\' "$x"', "[{}]"),
    ("printf '[%s]' {{ params.v | shell_quote }}", "[{}]"),
]


@pytest.mark.parametrize(("template", "expected"), PLACES)
@pytest.mark.parametrize("value", HOSTILE)
def test_a_hostile_value_is_one_literal_word_wherever_it_lands(
    template: str, expected: str, value: str
) -> None:
    printed = sh(render(template, values(v=value)))
    if "$(" in template:
        value = value.rstrip("\n")  # command substitution drops trailing newlines
    assert printed == expected.format(value)


@settings(max_examples=60, deadline=None)
@given(st.text(st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40))
def test_any_text_comes_back_unchanged_outside_and_inside_quotes(value: str) -> None:
    command = render(
        "printf '%s|' {{ params.v }} \"{{ params.v }}\" '{{ params.v }}' x{{ params.v }}y", values(v=value)
    )
    assert sh(command) == f"{value}|{value}|{value}|x{value}y|"


#: Pieces of shell an author may write around a value.
#: Pieces of shell an author may write around a value (line continuations included).
FRAGMENTS = [
    "echo ", " ", "a", ";", "\n", '"', "'", "\\", "$", "$(", "(", ")", "`", "${X:-", "}", "$((", "))",
    "((", "$'", "$$", "$#", "#", "<", "<<", "EOF", "case ", "c\\\nase ", " in ", "a)", ";;", "esac",
    "\\\n", "$\\\n", "(\\\n", "{ ", "; }", "|", "$[", "a[", "]", "]=1", "{{ params.v }}", "{{ params.v }}",
]  # fmt: skip


#: The shells a rendered command is tried with: the worker's ``/bin/sh``, and bash as it runs when
#: it is ``/bin/sh`` (POSIX mode), where it is installed.
SHELLS = [["/bin/sh"]] + ([["bash", "--posix"]] if shutil.which("bash") else [])


def runs_the_value(template: str, directory: Path) -> bool:
    """Whether a shell runs a command hidden in a value rendered into ``template`` (a value
    refused where it lands runs nothing)."""
    marker = directory / "ran"
    touch = f"touch {marker}"
    value = f"a\\\n'\"; {touch}; $({touch}) `{touch}` '\n{touch}\nEOF\n{touch}\n#)"
    try:
        command = render(template, values(v=value))
    except RenderError:
        return False
    for program in SHELLS:
        subprocess.run([*program, "-c", command], capture_output=True, timeout=10, check=False, cwd=directory)
    return marker.exists()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(FRAGMENTS), min_size=1, max_size=14))
def test_no_composition_of_shell_around_a_value_runs_the_value(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str]
) -> None:
    template = "".join(pieces) + " {{ params.v }}"
    assert not runs_the_value(template, tmp_path_factory.mktemp("fuzz")), template


@pytest.mark.parametrize(
    "template",
    [
        "\\\"{{ params.v }}\"$$($'esac in \n;;$' {{ params.v }}",  # $$ is a parameter, not $ and $(
        '$$#do } done\t$"a$\n {{ params.v }}',  # a # inside a word starts no comment
        "$(a)# in '\"'$'\n$($#;;echo {{ params.v }}",
        '\\\n#")( {{ params.v }}',  # a line continuation is not part of a word
        "cat <\\\n<EOF\n{{ params.v }}\nEOF",  # nor does it split an operator
    ],
)
def test_shell_is_read_as_sh_reads_it(template: str, tmp_path: Path) -> None:
    assert not runs_the_value(template, tmp_path)


def test_the_payload_is_quoted_once_and_shell_quote_does_not_quote_again() -> None:
    assert render("echo {{ params.msg }}", values(msg=PAYLOAD)) == f"echo '{PAYLOAD}'"
    assert render("echo {{ params.msg | shell_quote }}", values(msg="a b")) == "echo 'a b'"
    assert sh(render("echo {{ params.msg | shell_quote }}", values(msg=PAYLOAD))) == f"{PAYLOAD}\n"


def test_safe_context_values_render_as_before() -> None:
    text = "{{ ds }} {{ ds_nodash }} {{ ts }} {{ run_id }} {{ try_number }} {{ params.n }}"
    assert render(text, values(n=3)) == (
        "2026-03-04 20260304 2026-03-04T05:06:07+00:00 manual__2026-03-04T05:06:07+00:00 1 3"
    )


def test_raw_inserts_the_authors_text_as_shell_code() -> None:
    command = render("echo {{ params.msg }} {{ '| tr a-z A-Z' | raw }}", values(msg=PAYLOAD))
    assert sh(command) == PAYLOAD.upper() + "\n"


def test_loops_and_conditions_emit_the_authors_text_and_quote_each_value() -> None:
    template = (
        "{% for f in params.files %}printf '[%s]' {{ f }}; {% endfor %}{% if params.go %}echo{% endif %}"
    )
    command = render(template, values(files=["a b", "c;d", "$(id)"], go=True))
    assert command == "printf '[%s]' 'a b'; printf '[%s]' 'c;d'; printf '[%s]' '$(id)'; echo"
    assert sh(command) == "[a b][c;d][$(id)]\n"


def test_lists_and_dicts_are_quoted_as_their_text() -> None:
    command = render("printf '%s|' {{ params.l }} {{ params.d }}", values(l=[1, "x; id"], d={"k": "$(id)"}))
    assert sh(command) == "[1, 'x; id']|{'k': '$(id)'}|"


def test_a_value_is_never_rendered_again() -> None:
    command = render(
        "printf '%s' {{ params.t }}", values(t="{{ params.t }}{% for x in [1] %}{{ x }}{% endfor %}")
    )
    assert sh(command) == "{{ params.t }}{% for x in [1] %}{{ x }}{% endfor %}"


def test_text_built_in_a_set_block_is_one_quoted_value() -> None:
    command = render(
        "{% set both %}{{ params.a }} {{ params.b }}{% endset %}printf '[%s]' {{ both }}",
        values(a="1", b=";id"),
    )
    assert sh(command) == "[1 ;id]"


@pytest.mark.parametrize(
    ("template", "place"),
    [
        ("echo `echo {{ params.v }}`", "inside backquotes"),
        ("echo ${X:-{{ params.v }}}", "inside ${ }"),
        ("echo $(( {{ params.v }} ))", "inside $(( ))"),
        ("(( {{ params.v }} ))", "inside $(( )) or (( ))"),
        ("echo $[ {{ params.v }} ]", "after $[ ] (bash's arithmetic)"),
        ("a[{{ params.v }}]=1", "inside an array subscript"),
        ("a['{{ params.v }}']=1", "inside an array subscript"),
        ("echo $'{{ params.v }}'", "inside $' '"),
        ("echo hi # {{ params.v }}", "inside a comment"),
        ("cat <<EOF\n{{ params.v }}\nEOF", "after a here-document operator"),
        ("echo \\{{ params.v }}", "right after a backslash"),
        ('echo "\\{{ params.v }}"', "right after a backslash"),
        ("echo ${{ params.v }}", "right after $"),
        ("echo $(case a in a) echo {{ params.v }};; esac)", "after a case statement"),
    ],
)
def test_a_value_where_no_quoting_is_safe_fails_naming_the_place(template: str, place: str) -> None:
    with pytest.raises(RenderError, match=re.escape(f"a value lands {place}")):
        render(template, values(v="x"))


def test_the_authors_own_text_may_use_every_construct() -> None:
    template = "echo `echo a` ${HOME:+b} $((1+1)) # {% if true %}c{% endif %}"
    assert render(template, values()) == template.replace("{% if true %}c{% endif %}", "c")


# -- conf: only declared params ----------------------------------------------------------------------


def spec_of(**options: Any) -> pb.DagSpec:
    @dag(dag_id="strict", params={"msg": "hi"}, **options)
    def strict() -> None:
        shell("echo {{ params.msg }}", task_id="t", params={"task_param": 1})

    return strict().to_spec()


def test_a_conf_may_set_only_declared_params() -> None:
    spec = spec_of()
    assert not spec.allow_undeclared_conf
    check_run_params(spec, {"msg": "x", "task_param": 2})
    with pytest.raises(InvalidArgument, match=r"^conf\.cmd: is not a param of the DAG") as refused:
        check_run_params(spec, {"msg": "x", "cmd": "id"})
    assert refused.value.field == "conf.cmd"


def test_a_dag_may_allow_undeclared_conf_from_the_sdk_and_a_spec_file() -> None:
    spec = spec_of(allow_undeclared_conf=True)
    assert spec.allow_undeclared_conf
    check_run_params(spec, {"cmd": "id"})
    parsed = json_format.ParseDict({"dag_id": "d", "allow_undeclared_conf": True}, pb.DagSpec())
    check_run_params(parsed, {"anything": 1})


def test_schedctl_dags_test_applies_the_same_check(tmp_path: Path) -> None:
    path = tmp_path / "strict.json"
    tasks = [{"task_id": "t", "shell": {"command": "echo {{ params.msg }}"}}]
    path.write_text(json.dumps({"dag_id": "strict", "params": {"msg": "hi"}, "tasks": tasks}))
    refused = CliRunner().invoke(app, ["dags", "test", str(path), "--conf", '{"cmd": "id"}'])
    assert refused.exit_code == 2 and "conf.cmd: is not a param of the DAG" in refused.output, refused.output
    ran = CliRunner().invoke(app, ["dags", "test", str(path), "--conf", json.dumps({"msg": PAYLOAD})])
    assert ran.exit_code == 0, ran.output
    assert f"\n[t] | {PAYLOAD}\n" in ran.output and "uid=" not in ran.output
