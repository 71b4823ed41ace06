"""Local receivers of notifications for the tests: an HTTP server recording every POST (headers and
raw body, to check signatures) and an SMTP server (aiosmtpd) recording every message."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from email import message_from_bytes
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from aiosmtpd.controller import Controller


@dataclass(frozen=True)
class Post:
    path: str
    headers: dict[str, str]
    raw: bytes
    #: When it arrived (``time.time()``).
    at: float = 0.0

    @property
    def body(self) -> dict[str, Any]:
        return dict(json.loads(self.raw))


class PostServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.lock = threading.Lock()
        self.posts: list[Post] = []

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"

    def at(self, path: str) -> list[Post]:
        with self.lock:
            return [p for p in self.posts if p.path == path]


class _Handler(BaseHTTPRequestHandler):
    server: PostServer

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        with self.server.lock:
            self.server.posts.append(Post(self.path, dict(self.headers.items()), raw, time.time()))
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Mailbox:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        with self.lock:
            self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"


@dataclass
class SmtpServer:
    host: str
    port: int
    mailbox: _Mailbox

    def received(self) -> list[Message]:
        with self.mailbox.lock:
            return list(self.mailbox.messages)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def post_server() -> Iterator[PostServer]:
    server = PostServer()
    thread = threading.Thread(target=server.serve_forever, name="post-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def smtp_server() -> Iterator[SmtpServer]:
    mailbox = _Mailbox()
    controller = Controller(mailbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    try:
        yield SmtpServer("127.0.0.1", controller.port, mailbox)
    finally:
        controller.stop()
