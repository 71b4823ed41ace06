"""Variables and connections in PostgreSQL: stored as Fernet tokens; a key rotation (new key first,
old keys still decrypt, ``rotate`` re-encrypts everything) leaves every value readable with the new
key alone; a process without keys lists names but reads no value; a task's read is answered only for
a running attempt of the asking worker, and only if granted to its DAG."""

from __future__ import annotations

import uuid

import pytest

from schedd_auth.secret_backends import EnvironmentBackend
from schedd_auth.secret_box import SecretBox, SecretKeyError, new_key
from schedd_core.errors import NotFound, PermissionDenied
from schedd_store import dispatch
from schedd_store.database import Engine
from schedd_store.secrets import CONNECTION, VARIABLE, SecretStore

from .helpers import leading_loop, registered_run, spec

pytestmark = pytest.mark.integration


async def test_rotation_re_encrypts_every_value_with_the_new_key(engine: Engine) -> None:
    old, new = new_key(), new_key()
    before = SecretStore(engine, SecretBox([old]))
    await before.set(VARIABLE, "v1", "value-one")
    await before.set(CONNECTION, "c1", '{"password": "pw"}')
    during = SecretStore(engine, SecretBox([new, old]))
    assert (await during.get(VARIABLE, "v1", with_value=True)).value == "value-one"
    assert await during.rotate() == {VARIABLE: 1, CONNECTION: 1}
    after = SecretStore(engine, SecretBox([new]))
    assert (await after.get(VARIABLE, "v1", with_value=True)).value == "value-one"
    assert (await after.get(CONNECTION, "c1", with_value=True)).connection().password == "pw"
    with pytest.raises(SecretKeyError):
        await SecretStore(engine, SecretBox([old])).get(VARIABLE, "v1", with_value=True)


async def test_without_keys_names_are_listed_and_values_are_unavailable(engine: Engine) -> None:
    await SecretStore(engine, SecretBox([new_key()])).set(VARIABLE, "v", "x")
    keyless = SecretStore(engine, None)
    assert [r.name for r in await keyless.list(VARIABLE)] == ["v"]
    with pytest.raises(SecretKeyError, match="no encryption key"):
        await keyless.get(VARIABLE, "v", with_value=True)
    with pytest.raises(SecretKeyError):
        await keyless.set(VARIABLE, "w", "y")


async def test_a_backend_answers_before_the_database(engine: Engine) -> None:
    store = SecretStore(
        engine, SecretBox([new_key()]), [EnvironmentBackend({"SCHEDD_VAR_SHARED": "from-env"})]
    )
    await store.set(VARIABLE, "shared", "from-db")
    found = await store.get(VARIABLE, "shared", with_value=True)
    assert (found.value, found.source) == ("from-env", "environment")
    with pytest.raises(NotFound):
        await store.get(VARIABLE, "absent", with_value=False)


async def _running_attempt(engine: Engine, dag_id: str, worker_id: str, token: int) -> str:
    """The attempt id of the one task of a new run of ``dag_id``, claimed by ``worker_id``."""
    run = await registered_run(engine, spec(dag_id, {"t": []}))
    loop = await leading_loop(engine, token)
    await loop.evaluate([run.pk])
    [claim] = await dispatch.claim(engine, worker_id=worker_id, queues=["default"], limit=10)
    return str(claim.attempt_id)


async def test_a_task_reads_only_for_its_own_running_attempt_and_granted_dag(engine: Engine) -> None:
    store = SecretStore(engine, SecretBox([new_key()]))
    await store.set(VARIABLE, "owned", "secret", dag_ids=["owner"])
    await store.set(VARIABLE, "open", "for-all")
    mine = await _running_attempt(engine, "owner", "w1", 1)
    other = await _running_attempt(engine, "intruder", "w1", 2)
    record = await store.read_for_attempt(mine, "w1", VARIABLE, "owned")
    assert record is not None and record.value == "secret"
    assert await store.read_for_attempt(mine, "w1", VARIABLE, "absent") is None
    with pytest.raises(PermissionDenied):
        await store.read_for_attempt(other, "w1", VARIABLE, "owned")  # another DAG
    with pytest.raises(PermissionDenied):
        await store.read_for_attempt(mine, "w2", VARIABLE, "open")  # a worker that does not hold it
    with pytest.raises(PermissionDenied):
        await store.read_for_attempt(str(uuid.uuid4()), "w1", VARIABLE, "open")  # no such attempt
    open_record = await store.read_for_attempt(other, "w1", VARIABLE, "open")
    assert open_record is not None and open_record.value == "for-all"
