"""``schedctl dags``: register, list, pause and unpause DAGs, and list their next runs."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from schedctl import bundles, dagfiles, output
from schedctl.cli import (
    EXIT_REJECTED,
    OutputOption,
    app,
    call,
    collect,
    fail,
    show,
    state,
    use_format,
)
from schedctl.specfile import SpecFileError
from schedctl.versions import pick_version, print_diff, unified
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_core.bundle_archive import BundleError

dags_app = typer.Typer(help="Register and inspect DAGs.", no_args_is_help=True)
app.add_typer(dags_app, name="dags")


@dags_app.command("register")
def dags_register(
    path: Annotated[
        Path, typer.Argument(help="a DAG file (Python: every DAG in it; YAML; JSON) or a directory of them")
    ],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="validate and say what would change; store nothing")
    ] = False,
    diff: Annotated[
        bool, typer.Option("--diff", help="show how each spec differs from the DAG's latest version")
    ] = False,
    bundle: Annotated[
        Path | None,
        typer.Option(
            "--bundle",
            help="the code bundle's directory (default: the directory of the Python DAG files)",
        ),
    ] = None,
    no_bundle: Annotated[
        bool,
        typer.Option("--no-bundle", help="no code bundle: workers import the tasks from their environment"),
    ] = False,
    unpause: Annotated[
        bool,
        typer.Option(
            "--unpause", help="a DAG registered for the first time starts unpaused (by default, paused)"
        ),
    ] = False,
    keep_going: Annotated[
        bool,
        typer.Option(
            "--keep-going",
            help="register the DAGs that are valid even if other files or specs are not (exit 2 still)",
        ),
    ] = False,
    output_format: OutputOption = None,
) -> None:
    """Register DAGs. An unchanged spec makes no new version.

    A new DAG starts paused (unless the api is configured otherwise): nothing runs until
    ``schedctl dags unpause``, or ``--unpause`` here. A DAG registered again keeps its paused state.

    A Python file is imported here, on the client, to build the specs; the scheduler never
    imports user code. The code bundle (docs/bundles.md) is packed and uploaded with them, so a
    change to a task's code makes a new version.

    Every file is read and every spec validated by the api before any is stored, and every error
    is listed (each file's, each spec's). By default one error means nothing is stored and the exit
    code is 2; with --keep-going the valid DAGs are registered, and the exit code is still 2.
    """
    use_format(output_format)
    try:
        prepared = dagfiles.prepare(path, bundle=bundle, no_bundle=no_bundle)
    except (SpecFileError, BundleError) as exc:
        fail(EXIT_REJECTED, str(exc))
    packed = prepared.packed
    refused = dagfiles.validate(prepared.specs)
    errors = _list_errors(prepared.errors + list(refused.values()), keep_going)
    specs = [s for s in prepared.specs if s.dag_id not in refused]
    if packed is not None and not dry_run:
        uploaded = call(state.client.bundles.UploadBundle, bundles.upload_request(packed))
        assert isinstance(uploaded, api_pb2.UploadBundleResponse)
        verb = "uploaded" if uploaded.created else "already stored"
        output.err_console.print(
            f"code bundle {packed.sha256} ({len(packed.names)} files, {len(packed.archive)} bytes): {verb}",
            highlight=False,
        )
    for spec in specs:
        if diff:
            print_diff(spec)
        request = api_pb2.RegisterDagRequest(
            spec=spec, validate_only=dry_run, request_id=str(uuid.uuid4()), unpause=unpause
        )
        resp = call(state.client.dags.RegisterDag, request)
        assert isinstance(resp, api_pb2.RegisterDagResponse)
        show(resp, f"dag [bold]{spec.dag_id}[/bold]: {registration_summary(resp, dry_run=dry_run)}")
        if resp.created_dag:
            output.err_console.print(new_dag_note(spec.dag_id, resp), highlight=False)
    if errors:
        done = "valid" if dry_run else "registered"
        fail(EXIT_REJECTED, f"{len(errors)} error(s); the other DAGs are {done}")


def _list_errors(errors: list[str], keep_going: bool) -> list[str]:
    """Print every error; without ``keep_going``, exit 2 when there is one (nothing stored yet)."""
    for error in errors:
        output.err_console.print(f"[red]error:[/red] {escape(error)}", highlight=False)
    if errors and not keep_going:
        fail(EXIT_REJECTED, f"{len(errors)} error(s); nothing registered (--keep-going registers the rest)")
    return errors


def registration_summary(resp: api_pb2.RegisterDagResponse, *, dry_run: bool) -> str:
    """What a registration did: a new version, the current one unchanged, or the DAG moved back to
    an older version it had. The text ends with the DAG's current version hash."""
    vhash = resp.version.version_hash
    if dry_run:
        return (
            f"would register new version {vhash}" if resp.created_version else f"unchanged, version {vhash}"
        )
    if resp.created_version:
        text = f"registered new version {vhash}"
    elif resp.previous_version and resp.previous_version != vhash:
        text = f"current version moved back from {resp.previous_version} to version {vhash}"
    else:
        text = f"unchanged, version {vhash}"
    return text


def new_dag_note(dag_id: str, resp: api_pb2.RegisterDagResponse) -> str:
    """For a DAG the registration created (on standard error): whether it starts paused."""
    if resp.dag.paused:
        return f"dag {dag_id} is new and paused: nothing of it runs until schedctl dags unpause {dag_id}"
    return f"dag {dag_id} is new and unpaused"


@dags_app.command("list")
def dags_list(output_format: OutputOption = None) -> None:
    """List registered DAGs."""
    use_format(output_format)
    dags: list[pb.Dag] = collect(state.client.dags.ListDags, api_pb2.ListDagsRequest(), "dags")
    show(dags, output.dags_table(dags), empty="no DAGs registered")


@dags_app.command("pause")
def dags_pause(dag_id: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """Stop scheduling new tasks of the DAG's runs (running tasks finish)."""
    use_format(output_format)
    resp = call(state.client.dags.PauseDag, api_pb2.PauseDagRequest(name=f"dags/{dag_id}"))
    show(resp, f"dag {dag_id} paused")


@dags_app.command("unpause")
def dags_unpause(dag_id: Annotated[str, typer.Argument()], output_format: OutputOption = None) -> None:
    """Resume scheduling the DAG's runs."""
    use_format(output_format)
    resp = call(state.client.dags.UnpauseDag, api_pb2.PauseDagRequest(name=f"dags/{dag_id}"))
    show(resp, f"dag {dag_id} unpaused")


@dags_app.command("next-runs")
def dags_next_runs(
    dag_id: Annotated[str, typer.Argument(help="the DAG")],
    count: Annotated[int, typer.Option("--count", "-n", help="how many (at most 100)")] = 5,
    output_format: OutputOption = None,
) -> None:
    """The logical dates and data intervals of the DAG's next scheduled runs."""
    use_format(output_format)
    resp = call(
        state.client.dags.ListNextRuns, api_pb2.ListNextRunsRequest(name=f"dags/{dag_id}", count=count)
    )
    assert isinstance(resp, api_pb2.ListNextRunsResponse)
    show(list(resp.intervals), output.intervals_table(list(resp.intervals)), empty="no scheduled runs ahead")


@dags_app.command("get")
def dags_get(
    dag_id: Annotated[str, typer.Argument(help="the DAG")], output_format: OutputOption = None
) -> None:
    """A DAG: paused or not, its latest version and spec."""
    use_format(output_format)
    dag = call(state.client.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{dag_id}"))
    assert isinstance(dag, pb.Dag)
    show(dag, output.dags_table([dag]))


@dags_app.command("versions")
def dags_versions(
    dag_id: Annotated[str, typer.Argument(help="the DAG")], output_format: OutputOption = None
) -> None:
    """The DAG's versions, newest first; CURRENT marks the one new runs use (the one registered last,
    which may be an older version registered again)."""
    use_format(output_format)
    request = api_pb2.ListDagVersionsRequest(parent=f"dags/{dag_id}")
    versions: list[pb.DagVersion] = collect(state.client.dags.ListDagVersions, request, "versions")
    table = Table("VERSION", "CREATED", "TASKS", "CURRENT")
    for v in versions:
        table.add_row(v.version_hash, output.utc(v.create_time), str(v.task_count), "*" if v.current else "")
    show(versions, table, empty="no versions")


@dags_app.command("diff")
def dags_diff(
    dag_id: Annotated[str, typer.Argument(help="the DAG")],
    old: Annotated[str, typer.Argument(help="a version hash (a unique prefix will do)")],
    new: Annotated[str, typer.Argument(help="another; default the latest")] = "",
    output_format: OutputOption = None,
) -> None:
    """How two versions of a DAG differ: a unified diff of their specs (in every output format)."""
    use_format(output_format)
    request = api_pb2.ListDagVersionsRequest(parent=f"dags/{dag_id}")
    hashes = [v.version_hash for v in collect(state.client.dags.ListDagVersions, request, "versions")]
    chosen = [pick_version(dag_id, hashes, old), pick_version(dag_id, hashes, new) if new else hashes[0]]
    specs = []
    for version_hash in chosen:
        name = f"dags/{dag_id}/versions/{version_hash}"
        found = call(state.client.dags.GetDagVersion, api_pb2.GetDagVersionRequest(name=name))
        assert isinstance(found, pb.DagVersion)
        specs.append(found.spec)
    text = unified(specs[0], specs[1], f"versions/{chosen[0]}", f"versions/{chosen[1]}")
    output.console.print(text or "no differences", highlight=False, markup=False)
