"""Sending a notification out: a webhook (an HTTP POST of the event as JSON, signed when the target
names a signing connection) or an email over SMTP. Both run in a thread (blocking clients).

The signature lets a receiver check that the POST comes from this deployment and is recent:
``X-Schedd-Timestamp`` is the sending time in Unix seconds and ``X-Schedd-Signature`` is
``v1=<hex HMAC-SHA256 of "<timestamp>.<body>">`` keyed with the connection's password. A receiver
recomputes it over the raw body, compares in constant time (:func:`verify_signature`) and refuses a
timestamp older than its tolerance (5 minutes is usual), so a captured request cannot be replayed
later. A retried delivery is signed again with a new timestamp; the body's ``event_id`` is the same,
so a receiver dedupes on it.

Secrets (the signing key, the SMTP password) come from connections and are never logged; an error
message names the connection, never its value.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import smtplib
import ssl
import time
import urllib.request
from email.message import EmailMessage
from typing import Any

from schedd.v1 import alerts_pb2
from schedd_core.connections import ConnectionValue

WEBHOOK_TIMEOUT = 10.0
SMTP_TIMEOUT = 30.0
SIGNATURE_HEADER = "X-Schedd-Signature"
TIMESTAMP_HEADER = "X-Schedd-Timestamp"


def signature(key: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(key.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify_signature(
    key: str, body: bytes, headers: dict[str, str], *, tolerance: float = 300.0, now: float | None = None
) -> bool:
    """What a receiver does: the signature matches and the timestamp is within ``tolerance``."""
    try:
        timestamp = int(headers.get(TIMESTAMP_HEADER, ""))
    except ValueError:
        return False
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        return False
    return hmac.compare_digest(signature(key, timestamp, body), headers.get(SIGNATURE_HEADER, ""))


def post_webhook(url: str, body: dict[str, Any], *, signing_key: str = "") -> None:
    data = json.dumps(body, sort_keys=True).encode()
    headers = {"Content-Type": "application/json"}
    if signing_key:
        timestamp = int(time.time())
        headers[TIMESTAMP_HEADER] = str(timestamp)
        headers[SIGNATURE_HEADER] = signature(signing_key, timestamp, data)
    request = urllib.request.Request(url, data=data, method="POST", headers=headers)
    with urllib.request.urlopen(request, timeout=WEBHOOK_TIMEOUT) as response:
        if response.status >= 300:
            raise RuntimeError(f"webhook answered {response.status}")


def send_email(target: alerts_pb2.EmailTarget, body: dict[str, Any], smtp: ConnectionValue) -> None:
    """One email to ``target.to`` through the SMTP server of the connection ``smtp``."""
    message = EmailMessage()
    message["From"] = str(smtp.extra.get("from") or smtp.login or "schedd@localhost")
    message["To"] = ", ".join(target.to)
    subject = target.subject or "[schedd]"
    message["Subject"] = (
        f"{subject} {body.get('event', '')}: {body.get('dag_id', '')} {body.get('run_id', '')}"
    )
    message.set_content(json.dumps(body, indent=2, sort_keys=True))
    use_ssl = str(smtp.extra.get("ssl", "")).lower() in ("1", "true", "yes")
    starttls = str(smtp.extra.get("starttls", "")).lower() in ("1", "true", "yes")
    client_class = smtplib.SMTP_SSL if use_ssl else smtplib.SMTP
    with client_class(
        smtp.host or "localhost", smtp.port or (465 if use_ssl else 25), timeout=SMTP_TIMEOUT
    ) as client:
        if starttls:
            client.starttls(context=ssl.create_default_context())
        if smtp.login:
            client.login(smtp.login, smtp.password)
        client.send_message(message)
