"""Checking the callbacks and the deadline alert of a spec: where events go (Python callables,
webhooks, emails) and when a run's deadline falls. Each problem is an InvalidArgument naming the
field; connections named here (a signing key, an SMTP server) are checked for their name only, and
looked up when an event is delivered (so a connection may be created after the DAG)."""

from __future__ import annotations

import re
from collections.abc import Sequence

from schedd.v1 import alerts_pb2, resources_pb2 as pb
from schedd_core.connections import NAME
from schedd_core.durations import check_duration
from schedd_core.errors import InvalidArgument
from schedd_core.limits import MAX_CALLBACKS, MAX_URL_CHARS

PYTHON_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", re.ASCII)
_URL = re.compile(r"https?://[^\s/$.?#][^\s]*")
_EMAIL = re.compile(r"[^@\s,<>]+@[^@\s,<>]+", re.ASCII)
#: The most recipients of one email callback.
MAX_RECIPIENTS = 50


def _check_url(field: str, url: str) -> None:
    if not _URL.fullmatch(url) or len(url) > MAX_URL_CHARS:
        raise InvalidArgument(field, "must be an http:// or https:// URL")


def _check_connection(field: str, conn_id: str, *, required: bool) -> None:
    if (conn_id or required) and not NAME.fullmatch(conn_id):
        raise InvalidArgument(field, "must name a connection (letters, digits, '_', '.' or '-')")


def check_callback(field: str, callback: pb.Callback) -> None:
    kind = callback.WhichOneof("target")
    if kind is None:
        raise InvalidArgument(field, "needs a target: python, webhook_url, webhook or email")
    if kind == "python":
        if not PYTHON_TARGET.fullmatch(callback.python.target):
            raise InvalidArgument(f"{field}.python.target", "must look like 'package.module:function'")
        if callback.python.args or callback.python.kwargs:
            raise InvalidArgument(f"{field}.python", "a callback takes no arguments: it gets the event")
    elif kind == "webhook_url":
        _check_url(f"{field}.webhook_url", callback.webhook_url)
    elif kind == "webhook":
        _check_url(f"{field}.webhook.url", callback.webhook.url)
        _check_connection(
            f"{field}.webhook.signing_connection", callback.webhook.signing_connection, required=False
        )
    else:
        email = callback.email
        if not email.to or len(email.to) > MAX_RECIPIENTS:
            raise InvalidArgument(f"{field}.email.to", f"needs 1 to {MAX_RECIPIENTS} addresses")
        for i, address in enumerate(email.to):
            if not _EMAIL.fullmatch(address):
                raise InvalidArgument(f"{field}.email.to[{i}]", "is not an email address")
        _check_connection(f"{field}.email.connection", email.connection, required=True)
        if len(email.subject) > 200 or "\n" in email.subject or "\r" in email.subject:
            raise InvalidArgument(f"{field}.email.subject", "must be one line of at most 200 characters")


def check_callback_list(field: str, callbacks: Sequence[pb.Callback]) -> None:
    if len(callbacks) > MAX_CALLBACKS:
        raise InvalidArgument(field, f"has {len(callbacks)} callbacks; the limit is {MAX_CALLBACKS}")
    for i, callback in enumerate(callbacks):
        check_callback(f"{field}[{i}]", callback)


def check_callbacks(where: str, owner: pb.DagSpec | pb.TaskSpec, events: tuple[str, ...]) -> None:
    for event in events:
        check_callback_list(f"{where}.{event}", getattr(owner, event))


def check_deadline(spec: pb.DagSpec) -> None:
    if not spec.HasField("deadline"):
        return
    deadline = spec.deadline
    if deadline.reference not in (
        alerts_pb2.DEADLINE_REFERENCE_UNSPECIFIED,
        alerts_pb2.DEADLINE_REFERENCE_LOGICAL_DATE,
        alerts_pb2.DEADLINE_REFERENCE_QUEUED_AT,
    ):
        raise InvalidArgument("spec.deadline.reference", "must be LOGICAL_DATE or QUEUED_AT")
    if not deadline.HasField("interval"):
        raise InvalidArgument("spec.deadline.interval", "must be a positive duration")
    check_duration("spec.deadline.interval", deadline.interval, positive=True)
    check_callback_list("spec.deadline.callbacks", deadline.callbacks)
