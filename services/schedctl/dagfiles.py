"""What ``dags register`` sends for a DAG file or directory, and ``dags render`` prints: one
resolution for both.

:func:`prepare` picks the code bundle (``schedctl.bundles.bundle_directory``: ``--bundle``, else the
Python files' directory), derives the Python tasks' module names from the bundle's import root,
and names the bundle in every spec with Python tasks. Guaranteed: with a bundle, the specs do not
depend on the current directory, and ``dags render`` of a path prints exactly the specs ``dags
register`` of that path with the same options sends. Not guaranteed: without a bundle
(``--no-bundle``), module names are relative to the current directory or ``sys.path``, as workers
import them from their own environment (``schedd_sdk.loader``).

A file that cannot be read or compiled does not stop the others: each such file's error is
collected (:attr:`Prepared.errors`), so a directory's problems are all listed at once; what to do
about them is the command's choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import grpc

from schedctl import bundles
from schedctl.cli import report, state
from schedctl.specfile import load_each
from schedd.v1 import api_pb2, resources_pb2 as pb
from schedd_exec.bundle_pack import PackedBundle

#: Answers of a validating RegisterDag that reject one spec (the others may still be fine).
_REJECTIONS = (
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.ALREADY_EXISTS,
)


@dataclass(frozen=True)
class Prepared:
    #: The specs of the files that loaded, in file order, each as it is sent.
    specs: list[pb.DagSpec]
    #: The code bundle to upload first; None when no spec has a Python task, or without a bundle.
    packed: PackedBundle | None
    #: One message per file that could not be read or compiled, naming the file.
    errors: list[str]


def prepare(path: Path, *, bundle: Path | None, no_bundle: bool) -> Prepared:
    """The specs registering ``path`` sends, with its bundle. SpecFileError or BundleError for a
    problem of the whole registration (a bad ``--bundle``, a directory without DAG files, a task
    naming a module its bundle lacks)."""
    directory = None if no_bundle else bundles.bundle_directory(path, bundle)
    specs, errors = load_each(path, bundles.loading_root(directory))
    packed = bundles.attach(specs, directory) if directory is not None else None
    return Prepared(specs, packed, errors)


def validate(specs: list[pb.DagSpec]) -> dict[str, str]:
    """The api's objection to each spec it would refuse, by DAG id (nothing is stored); any other
    failure, such as an unreachable api, exits as every command does."""
    refused: dict[str, str] = {}
    for spec in specs:
        try:
            state.client.call(
                state.client.dags.RegisterDag, api_pb2.RegisterDagRequest(spec=spec, validate_only=True)
            )
        except grpc.RpcError as exc:
            if exc.code() not in _REJECTIONS:
                report(exc)
            refused[spec.dag_id] = f"dag {spec.dag_id}: {exc.code().name}: {exc.details()}"
    return refused
