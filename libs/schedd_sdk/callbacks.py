"""Callbacks: where an event of a task or a run is delivered (a Python callable or notifier run on a
worker, a webhook, an email), as the options ``on_failure``, ``on_retry``, ``on_success`` and a
deadline alert's ``callback`` take them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from schedd.v1 import alerts_pb2, resources_pb2 as pb
from schedd_sdk.errors import DagDefinitionError
from schedd_sdk.targets import import_path

_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*", re.ASCII)


@dataclass(frozen=True)
class Callback:
    """Where an event (failure, retry, success, a missed deadline) is delivered.

    ``Callback.python("pkg.mod:func")`` runs a callable on a worker; ``Callback.webhook(url)``
    POSTs a JSON body to an http(s) URL (signed with a connection's password when
    ``signing_connection`` is given); ``Callback.email(to, connection=...)`` mails it through an
    SMTP connection; ``Callback.notifier(MyNotifier)`` runs a :class:`schedd_sdk.Notifier`. A plain
    top-level function may be passed wherever a callback is expected; it becomes ``Callback.python``
    of its import path.
    """

    kind: Literal["python", "webhook", "email"]
    target: str
    signing_connection: str = ""
    to: tuple[str, ...] = ()
    subject: str = ""

    @classmethod
    def python(cls, target: str | Callable[..., Any]) -> Callback:
        """A Python callable named ``package.module:function`` (or the function itself)."""
        if callable(target):
            return cls("python", import_path(target, what="callback"))
        if not isinstance(target, str) or not _TARGET.fullmatch(target):
            raise DagDefinitionError(f"Callback.python: {target!r} must look like 'package.module:function'")
        return cls("python", target)

    @classmethod
    def notifier(cls, notifier: type) -> Callback:
        """A :class:`schedd_sdk.Notifier` subclass (top level of its module), run on a worker."""
        if not isinstance(notifier, type) or not callable(getattr(notifier, "deliver", None)):
            raise DagDefinitionError(f"Callback.notifier: {notifier!r} is not a Notifier subclass")
        return cls("python", import_path(notifier, what="notifier") + ".deliver")

    @classmethod
    def webhook(cls, url: str, *, signing_connection: str = "") -> Callback:
        """An HTTP POST of a JSON body to ``url`` (http or https)."""
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise DagDefinitionError(f"Callback.webhook: {url!r} is not an http(s) URL")
        return cls("webhook", url, signing_connection=signing_connection)

    @classmethod
    def email(
        cls, to: str | Sequence[str], *, connection: str = "smtp_default", subject: str = ""
    ) -> Callback:
        """An email to ``to`` through the SMTP server of the connection ``connection``."""
        recipients = (to,) if isinstance(to, str) else tuple(to)
        if not recipients or not all(isinstance(r, str) and "@" in r for r in recipients):
            raise DagDefinitionError(f"Callback.email: {to!r} is not a list of email addresses")
        return cls("email", connection, to=recipients, subject=subject)

    def to_proto(self) -> pb.Callback:
        if self.kind == "python":
            return pb.Callback(python=pb.PythonCallable(target=self.target))
        if self.kind == "email":
            return pb.Callback(
                email=alerts_pb2.EmailTarget(to=self.to, connection=self.target, subject=self.subject)
            )
        if self.signing_connection:
            return pb.Callback(
                webhook=alerts_pb2.WebhookTarget(url=self.target, signing_connection=self.signing_connection)
            )
        return pb.Callback(webhook_url=self.target)


CallbackLike = Callback | Callable[..., Any]
Callbacks = CallbackLike | Sequence[CallbackLike]
