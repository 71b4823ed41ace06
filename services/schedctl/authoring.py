"""``schedctl dags render`` and ``schedctl dags test``: the loop of writing a DAG, without a cluster.

* ``render FILE`` prints the spec(s) a DAG file compiles to (YAML unless ``-o json``), in the form
  ``dags register`` reads back; one spec as one document, several as a YAML stream or a JSON list.
  They are exactly what ``dags register FILE`` with the same ``--bundle``/``--no-bundle`` sends
  (``schedctl.dagfiles``): the same module names of Python tasks and the same code bundle hash,
  whatever the current directory. Fields at their defaults are left out, and integral numbers
  are shown as integers unless a param is declared ``number`` (``schedctl.documents``).
* ``test FILE_OR_DAG`` runs a DAG once in this process (:mod:`schedctl.local_run`: the scheduler's
  planner, a worker's executor, no etcd or PostgreSQL), printing each task's state and output as it
  goes; it exits 0 when the run succeeds and 1 when it fails, as Airflow's ``dags test`` does.

A file that cannot be read, fails to import or does not compile to a valid spec exits 2 with the
message (the file, the DAG and the task at fault); so does an unknown DAG id or bad ``--conf``
(not a JSON object, or one the api would refuse, with the api's message: ``schedctl.local_inputs``).
``--logical-date`` on a DAG with a schedule makes the run the scheduled run of the interval starting
then (its tasks see that data interval); a date no interval starts at exits 2. Without it, or for a
DAG without a schedule, the run is manual (no data interval).
Neither command talks to the api.
"""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
import yaml

from schedctl import dagfiles
from schedctl.cli import EXIT_REJECTED, EXIT_RUN_FAILED, Format, OutputOption, fail, state, use_format
from schedctl.dags import dags_app
from schedctl.documents import spec_document
from schedctl.local_inputs import cluster_conf, scheduled_interval
from schedctl.runs import parse_conf
from schedctl.specfile import SpecFileError, load_specs
from schedd.v1 import resources_pb2 as pb
from schedd_core.bundle_archive import BundleError
from schedd_core.errors import InvalidArgument
from schedd_core.states import RunState, TaskState

if TYPE_CHECKING:
    from schedctl import local_run


@dags_app.command("render")
def dags_render(
    path: Annotated[Path, typer.Argument(help="a DAG file (Python, YAML or JSON) or a directory of them")],
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="the code bundle's directory, as for dags register"),
    ] = None,
    no_bundle: Annotated[
        bool, typer.Option("--no-bundle", help="no code bundle, as for dags register")
    ] = False,
    output_format: OutputOption = None,
) -> None:
    """Print the spec each DAG of a file compiles to (YAML, or JSON with -o json): exactly what dags
    register sends for it, from any directory. Every file that fails is listed; the exit code is
    then 2 and nothing is printed on standard output."""
    use_format(output_format)
    try:
        prepared = dagfiles.prepare(path, bundle=bundle, no_bundle=no_bundle)
    except (SpecFileError, BundleError) as exc:
        fail(EXIT_REJECTED, str(exc))
    if prepared.errors:
        fail(EXIT_REJECTED, "\n".join(prepared.errors))
    documents = [spec_document(spec) for spec in prepared.specs]
    if state.format is Format.json:
        typer.echo(json.dumps(documents[0] if len(documents) == 1 else documents, indent=2))
    else:
        typer.echo(yaml.safe_dump_all(documents, sort_keys=False, allow_unicode=True), nl=False)


@dags_app.command("test")
def dags_test(
    target: Annotated[
        str, typer.Argument(help="a DAG file or directory, or the id of a DAG in --dags-folder")
    ],
    conf: Annotated[str | None, typer.Option("--conf", help="the run's conf, a JSON object")] = None,
    logical_date: Annotated[
        str | None, typer.Option("--logical-date", help="ISO 8601 date or time [default: now, UTC]")
    ] = None,
    dag_id: Annotated[
        str | None, typer.Option("--dag", help="which DAG, when the file defines several")
    ] = None,
    dags_folder: Annotated[
        Path, typer.Option(envvar="SCHEDCTL_DAGS_FOLDER", help="where to look for a DAG given by id")
    ] = Path("dags"),
    output_format: OutputOption = None,
) -> None:
    """Run a DAG once, here, with no services; exit 0 if the run succeeds, 1 if it fails. It prints
    its progress as text in every output format."""
    use_format(output_format)
    spec = _pick(target, dag_id, dags_folder)
    moment = _logical_date(logical_date)
    try:
        run_conf = cluster_conf(spec, _conf(conf))
        interval = scheduled_interval(spec, moment) if logical_date is not None else None
    except InvalidArgument as exc:
        fail(EXIT_REJECTED, str(exc))
    covers = (
        f", the scheduled run of {interval[0].isoformat()} .. {interval[1].isoformat()}" if interval else ""
    )
    typer.echo(f"dag {spec.dag_id}: testing a run at {moment.isoformat()}{covers}")
    # Imported here: the local executor pulls in the store and the worker's executor, which no other
    # command needs (schedctl starts faster without them).
    from schedctl.local_run import run_locally

    run = asyncio.run(
        run_locally(spec, conf=run_conf, logical_date=moment, on_event=_print_event, data_interval=interval)
    )
    typer.echo(f"run {run.run_id}: {run.state.value}")
    if run.state is not RunState.SUCCESS:
        raise typer.Exit(EXIT_RUN_FAILED)


def _load(path: Path) -> list[pb.DagSpec]:
    try:
        return load_specs(path)
    except SpecFileError as exc:
        fail(EXIT_REJECTED, str(exc))


def _pick(target: str, dag_id: str | None, dags_folder: Path) -> pb.DagSpec:
    path = Path(target)
    if path.exists():
        specs = _load(path)
        wanted = dag_id
    else:
        if not dags_folder.is_dir():
            fail(
                EXIT_REJECTED, f"{target}: no such file, and no DAG folder {dags_folder} to find a DAG id in"
            )
        specs = _load(dags_folder)
        wanted = dag_id or target
    if wanted is None:
        if len(specs) == 1:
            return specs[0]
        fail(
            EXIT_REJECTED,
            f"{target} defines {len(specs)} DAGs ({', '.join(s.dag_id for s in specs)}); pick one with --dag",
        )
    for spec in specs:
        if spec.dag_id == wanted:
            return spec
    fail(EXIT_REJECTED, f"no DAG {wanted!r} in {path if path.exists() else dags_folder}")


def _conf(raw: str | None) -> dict[str, Any]:
    if raw is None:
        return {}
    return parse_conf(raw)


def _logical_date(raw: str | None) -> datetime:
    if raw is None:
        return datetime.now(UTC)
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        fail(EXIT_REJECTED, f"--logical-date {raw!r} is not an ISO 8601 date or time")
    return (moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)).astimezone(UTC)


def _print_event(event: local_run.TaskEvent) -> None:
    if event.output:
        for line in event.output.decode(errors="replace").splitlines():
            typer.echo(f"[{event.task_id}] | {line}")
    elif event.state is TaskState.RUNNING:
        typer.echo(f"[{event.task_id}] running")
    else:
        typer.echo(f"[{event.task_id}] {event.state.value}" + (f": {event.error}" if event.error else ""))
