"""The identity of a DAG version.

``version_hash`` is the SHA-256 of the spec's deterministic protobuf serialisation with
order-insensitive lists sorted (``canonical``), so two specs that mean the same thing hash the same.
It is stable for one protobuf schema; adding a field with a non-default value changes it, which is
intended.
"""

from __future__ import annotations

import hashlib

from schedd.v1 import resources_pb2 as pb


def canonical(spec: pb.DagSpec) -> pb.DagSpec:
    """A copy of ``spec`` with order-insensitive lists (tasks, upstream ids, tags) sorted."""
    copy = pb.DagSpec()
    copy.CopyFrom(spec)
    tasks = sorted(copy.tasks, key=lambda t: t.task_id)
    del copy.tasks[:]
    copy.tasks.extend(tasks)
    for task in copy.tasks:
        ups = sorted(set(task.upstream))
        del task.upstream[:]
        task.upstream.extend(ups)
    tags = sorted(set(copy.tags))
    del copy.tags[:]
    copy.tags.extend(tags)
    return copy


def version_hash(spec: pb.DagSpec) -> str:
    """The identity of a DAG version: 16 hex digits of SHA-256 over the canonical spec."""
    data = canonical(spec).SerializeToString(deterministic=True)
    return hashlib.sha256(data).hexdigest()[:16]
