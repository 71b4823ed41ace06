"""A DAG's specs side by side: a unified diff of two specs as YAML, how a file differs from what
is registered, and finding a version by a prefix of its hash.

Both sides of a diff are shown the same way: fields at their defaults left out, numbers as written
(``schedctl.documents.spec_document``), keys sorted and tasks in task id order, so a diff shows
only what differs in meaning, not in the order the tasks were given.
"""

from __future__ import annotations

import difflib

import grpc
import yaml

from schedctl import output
from schedctl.cli import EXIT_NOT_FOUND, EXIT_REJECTED, fail, report, state
from schedctl.documents import spec_document
from schedd.v1 import api_pb2, resources_pb2 as pb


def spec_text(spec: pb.DagSpec) -> list[str]:
    data = spec_document(spec)
    if "tasks" in data:
        data["tasks"] = sorted(data["tasks"], key=lambda task: str(task.get("task_id", "")))
    return yaml.safe_dump(data, sort_keys=True).splitlines(keepends=True)


def unified(old: pb.DagSpec | None, new: pb.DagSpec, old_name: str, new_name: str) -> str:
    before = spec_text(old) if old is not None else []
    return "".join(difflib.unified_diff(before, spec_text(new), fromfile=old_name, tofile=new_name))


def print_diff(spec: pb.DagSpec) -> None:
    """How ``spec`` differs from its DAG's latest registered version (all of it for a new DAG)."""
    try:
        current = state.client.call(
            state.client.dags.GetDag, api_pb2.GetDagRequest(name=f"dags/{spec.dag_id}")
        )
    except grpc.RpcError as exc:
        if exc.code() != grpc.StatusCode.NOT_FOUND:
            report(exc)
        output.console.print(f"dag {spec.dag_id}: new DAG", highlight=False)
        output.console.print(unified(None, spec, "/dev/null", "file"), highlight=False, markup=False)
        return
    text = unified(current.spec, spec, f"dags/{spec.dag_id}/versions/{current.latest_version}", "file")
    output.console.print(text or f"dag {spec.dag_id}: no changes", highlight=False, markup=False)


def pick_version(dag_id: str, hashes: list[str], prefix: str) -> str:
    """The one hash of ``hashes`` that starts with ``prefix``."""
    matches = [h for h in hashes if h.startswith(prefix)]
    if not matches:
        fail(EXIT_NOT_FOUND, f"dag {dag_id} has no version starting with {prefix!r}")
    if len(matches) > 1:
        fail(EXIT_REJECTED, f"{prefix!r} matches {len(matches)} versions of {dag_id}; give more of the hash")
    return matches[0]
