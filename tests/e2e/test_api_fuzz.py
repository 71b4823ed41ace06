"""Property-based: hostile requests against a live api never get INTERNAL or UNKNOWN, never bring it
down, and a rejected call stores nothing.

Requests are drawn for every method of every public service from a generic strategy over the
request message's descriptor: every field (nested messages, repeated and map fields, enums with
unknown values, Struct values, timestamps and durations at and past their limits) filled from
hostile values (NUL characters, 10,000-character strings, names of resources that exist, huge
and negative numbers). Raw bytes that are not a valid message are sent too. No scheduler runs,
so only the calls change the database, and a fingerprint of it must stay the same across every
call that was rejected.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import asyncpg
import grpc
import pytest
import yaml
from google.protobuf.descriptor import Descriptor, FieldDescriptor, ServiceDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings, strategies as st

from schedd.v1 import api_pb2, assets_pb2, secrets_pb2
from schedd_core.database_url import asyncpg_dsn
from schedd_devstack.services import Cluster

pytestmark = pytest.mark.e2e

#: Examples per method (about 20 methods): the suite's size in CI.
EXAMPLES = int(os.environ.get("SCHEDD_FUZZ_EXAMPLES", "40"))
SERVICES: list[ServiceDescriptor] = [
    *api_pb2.DESCRIPTOR.services_by_name.values(),
    *assets_pb2.DESCRIPTOR.services_by_name.values(),
    secrets_pb2.DESCRIPTOR.services_by_name["SecretsService"],
]
METHODS = [(service, method) for service in SERVICES for method in service.methods]
#: How long a watch may stay silent before it counts as accepted.
WATCH_SECONDS = 2.0
BAD_CODES = {grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN}

NAMES = [
    "dags/base",
    "dags/base/runs/r1",
    "dags/base/runs/r1/tasks/a",
    "dags/-",
    "workers/w1",
    "pools/default_pool",
    "default_pool",
    "base",
    "r1",
    "a",
]
HOSTILE = [
    "",
    "\x00",
    "a\x00b",
    "x" * 10_000,
    "dags/" + "x" * 5_000,
    "dags/base/runs/" + "\x00",
    "../../etc/passwd",
    "'; DROP TABLE dags; --",
    "\u202e\u0301\U0001f600",
    "%s%s%s%n",
    "dags/base/runs/r1/tasks/a/tries/1",
    " ",
]
strings = st.one_of(st.sampled_from(NAMES + HOSTILE), st.text(max_size=40))
int32s = st.one_of(
    st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31), 1000, 10_001]), st.integers(-(2**31), 2**31 - 1)
)
int64s = st.one_of(st.sampled_from([0, -1, 2**63 - 1, -(2**63)]), st.integers(-(2**63), 2**63 - 1))


def _json_values(depth: int) -> st.SearchStrategy[Any]:
    leaves = st.one_of(
        st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.floats(allow_nan=False), strings
    )
    if depth <= 0:
        return leaves
    inner = _json_values(depth - 1)
    return st.one_of(leaves, st.lists(inner, max_size=3), st.dictionaries(strings, inner, max_size=3))


@st.composite
def deep_struct(draw: st.DrawFn) -> dict[str, Any]:
    """A dict nested ``n`` levels deep, around the server's limit of 32."""
    value: Any = "leaf"
    for _ in range(draw(st.sampled_from([1, 31, 32, 33, 90]))):
        value = {"k": value}
    return {"k": value}


def messages(descriptor: Descriptor, depth: int = 0) -> st.SearchStrategy[Message]:
    """Any message of ``descriptor``'s type, its fields drawn from hostile values."""
    cls = GetMessageClass(descriptor)
    name = descriptor.full_name
    if name == "google.protobuf.Timestamp":
        return st.builds(
            cls,
            seconds=st.sampled_from([0, -62135596801, 253402300800, 2**40, -(2**40), 1_700_000_000]),
            nanos=st.sampled_from([0, 999_999_999, 1_000_000_000, -1]),
        )
    if name == "google.protobuf.Duration":
        return st.builds(
            cls,
            seconds=st.sampled_from([0, 1, -1, 10**12, 315576000001, 3600]),
            nanos=st.sampled_from([0, 1, -1, 1_000_000_000]),
        )
    if name == "google.protobuf.Struct":
        return st.one_of(st.dictionaries(strings, _json_values(2), max_size=4), deep_struct()).map(_struct)
    if depth > 3:
        return st.just(cls())
    fields = {field.name: _field(field, depth) for field in descriptor.fields}
    return st.fixed_dictionaries({}, optional=fields).map(lambda values: _fill(cls, values))


def _struct(value: dict[str, Any]) -> Message:
    from google.protobuf.struct_pb2 import Struct

    out = Struct()
    out.update(value)
    return out


def _field(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        value_field = field.message_type.fields_by_name["value"]
        return st.dictionaries(strings, _scalar(value_field, depth), max_size=3)
    single = _scalar(field, depth)
    return st.lists(single, max_size=3) if field.is_repeated else single


def _scalar(field: FieldDescriptor, depth: int) -> st.SearchStrategy[Any]:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        assert field.message_type is not None
        return messages(field.message_type, depth + 1)
    if field.type == FieldDescriptor.TYPE_STRING:
        return strings
    if field.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if field.type == FieldDescriptor.TYPE_BYTES:  # not a valid archive, or empty, or NULs
        return st.one_of(st.binary(max_size=64), st.just(b"\0" * 1024))
    if field.type == FieldDescriptor.TYPE_ENUM:
        assert field.enum_type is not None
        return st.one_of(st.sampled_from([v.number for v in field.enum_type.values]), st.integers(-5, 100))
    if field.type in (FieldDescriptor.TYPE_INT64, FieldDescriptor.TYPE_UINT64):
        return int64s if field.type == FieldDescriptor.TYPE_INT64 else st.integers(0, 2**64 - 1)
    if field.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True)
    return int32s


def _fill(cls: type[Message], values: dict[str, Any]) -> Message:
    message = cls()
    for name, value in values.items():
        field = cls.DESCRIPTOR.fields_by_name[name]
        target = getattr(message, name)
        if field.message_type is not None and field.message_type.GetOptions().map_entry:
            for key, item in value.items():
                if isinstance(item, Message):
                    target[key].CopyFrom(item)
                else:
                    target[key] = item
        elif field.is_repeated:
            if field.type == FieldDescriptor.TYPE_MESSAGE:
                for item in value:
                    target.add().CopyFrom(item)
            else:
                target.extend(value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


FINGERPRINT = """
SELECT (SELECT count(*) FROM dags) AS dags, (SELECT count(*) FROM dag_versions) AS versions,
       (SELECT string_agg(dag_id || paused::text, ',' ORDER BY dag_id) FROM dags) AS paused,
       (SELECT string_agg(id || state, ',' ORDER BY id) FROM dag_runs) AS runs,
       (SELECT string_agg(id || state || max_tries, ',' ORDER BY id) FROM task_instances) AS tasks,
       (SELECT string_agg(name || slots || description, ',' ORDER BY name) FROM pools) AS pools,
       (SELECT count(*) FROM request_log) AS requests,
       (SELECT count(*) FROM workers WHERE drain_requested) AS drains
"""


class Target:
    """The api under attack, with one channel to it and one connection to its database kept for the
    whole module (a new channel and connection per request would cost more than the request)."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.channel = grpc.insecure_channel(cluster.api_address)
        self._loop = asyncio.new_event_loop()
        self._conn = self._loop.run_until_complete(asyncpg.connect(asyncpg_dsn(cluster.database_url)))

    def fingerprint(self) -> dict[str, Any]:
        """What a rejected request must not change (``FINGERPRINT``)."""
        return dict(self._loop.run_until_complete(self._conn.fetchrow(FINGERPRINT)))

    def close(self) -> None:
        self.channel.close()
        self._loop.run_until_complete(self._conn.close())
        self._loop.close()


@pytest.fixture(scope="module")
def api(database_url: str, etcd_endpoints: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    from schedd_devstack.postgres import create_database, drop_database, with_database

    name = f"fuzz_{os.getpid()}"
    create_database(database_url, name)
    base = tmp_path_factory.mktemp("fuzz")
    cluster = Cluster(
        with_database(database_url, name), etcd_endpoints, base / "logs", schedulers=0, workers=0
    )
    try:
        cluster.start()
        spec = base / "base.yaml"
        spec.write_text(
            yaml.safe_dump({"dag_id": "base", "tasks": [{"task_id": "a", "shell": {"command": "true"}}]})
        )
        from tests.fixtures.services import schedctl

        assert schedctl(cluster.api_address, "dags", "register", str(spec)).returncode == 0
        assert schedctl(cluster.api_address, "runs", "trigger", "base", "--run-id", "r1").returncode == 0
        cluster.fetch(
            "INSERT INTO task_instances (run_pk, dag_id, logical_date, task_id, state) "
            "SELECT id, dag_id, logical_date, 'a', 'queued' FROM dag_runs WHERE run_id = 'r1'"
        )
        target = Target(cluster)
        try:
            yield target
        finally:
            target.close()
    finally:
        cluster.stop()
        drop_database(database_url, name)


def _call(api: Target, service: ServiceDescriptor, method: Any, payload: bytes) -> grpc.StatusCode:
    """The status the api answers ``payload`` with. A server-streaming method that accepted the
    request is OK once its first message (or its end) arrives, or when it has sent nothing within
    ``WATCH_SECONDS`` (a watch of logs that never come): a refusal comes at once."""
    path = f"/{service.full_name}/{method.name}"
    try:
        if method.server_streaming:
            stream = api.channel.unary_stream(path)(payload, timeout=WATCH_SECONDS)
            try:
                next(stream, None)
            finally:
                stream.cancel()
        else:
            api.channel.unary_unary(path)(payload, timeout=30)
    except grpc.RpcError as exc:
        if method.server_streaming and exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return grpc.StatusCode.OK  # accepted, and waiting for something to send
        return exc.code()
    return grpc.StatusCode.OK


def _check(api: Target, service: ServiceDescriptor, method: Any, payload: bytes, what: str) -> None:
    before = api.fingerprint()
    code = _call(api, service, method, payload)
    assert code not in BAD_CODES, f"{service.name}.{method.name} answered {code.name} to {what}"
    if code != grpc.StatusCode.OK:
        assert api.fingerprint() == before, f"{service.name}.{method.name} was rejected but stored"
    assert not api.cluster.dead(), "the api died"


@pytest.mark.parametrize(("service", "method"), METHODS, ids=[f"{s.name}.{m.name}" for s, m in METHODS])
def test_hostile_requests(api: Target, service: ServiceDescriptor, method: Any) -> None:
    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(request=messages(method.input_type))
    def run(request: Message) -> None:
        _check(api, service, method, request.SerializeToString(), repr(request)[:500])

    run()


RAW = [
    b"\x0a\x02\xff\xfe",  # a string field holding invalid UTF-8
    b"\xff\xff\xff\xff",  # not a message at all
    b"\x0a" + b"\x80" * 12,  # a length that never ends
    b"\x1a\x05" + b"\x0a\x03\x0a\x01\x0a",  # truncated nested messages
]


@pytest.mark.parametrize(("service", "method"), METHODS, ids=[f"{s.name}.{m.name}" for s, m in METHODS])
def test_undecodable_bytes(api: Target, service: ServiceDescriptor, method: Any) -> None:
    for payload in RAW:
        _check(api, service, method, payload, repr(payload))


def test_nesting_past_protobufs_limit(api: Target) -> None:
    """A conf nested 200 levels deep, encoded by hand: past protobuf's own decoding limit."""

    def varint(n: int) -> bytes:
        out = bytearray()
        while True:
            byte, n = n & 0x7F, n >> 7
            out.append(byte | (0x80 if n else 0))
            if not n:
                return bytes(out)

    def field(tag: int, payload: bytes) -> bytes:
        return bytes([tag]) + varint(len(payload)) + payload

    struct = b""
    for _ in range(200):  # Struct{fields: {"k": Value{struct_value: <struct>}}}
        struct = field(0x0A, field(0x0A, b"k") + field(0x12, field(0x2A, struct)))
    payload = field(0x0A, b"dags/base") + field(0x22, struct)
    service = api_pb2.DESCRIPTOR.services_by_name["RunService"]
    _check(api, service, service.methods_by_name["CreateRun"], payload, "a conf 200 levels deep")
