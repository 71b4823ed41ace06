"""The worker's enrollment settings and token cache (``schedd_worker.enrollment``), without a
registry: which token a worker connects with, and that the cached token is readable by its owner
only."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from schedd_worker.config import WorkerConfig
from schedd_worker.enrollment import EnrollmentFailed, EnrollmentSettings, with_own_token, write_cache

CONFIG = WorkerConfig(registries=("127.0.0.1:1",), worker_id="w-1", hostname="h", incarnation="i")


def test_no_enrollment_token_means_no_enrollment(tmp_path: Path) -> None:
    assert EnrollmentSettings.from_env({}) is None
    token_file = tmp_path / "enroll"
    token_file.write_text("sdt_x\n")
    settings = EnrollmentSettings.from_env({"SCHEDD_ENROLL_TOKEN_FILE": str(token_file)})
    assert settings == EnrollmentSettings("sdt_x", None)
    with pytest.raises(EnrollmentFailed, match="SCHEDD_ENROLL_TOKEN_FILE"):
        EnrollmentSettings.from_env({"SCHEDD_ENROLL_TOKEN_FILE": str(tmp_path / "missing")})


def test_a_worker_token_wins_and_a_cached_token_of_the_same_worker_is_reused(tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    env = {"SCHEDD_ENROLL_TOKEN": "sdt_enroll", "SCHEDD_WORKER_TOKEN_CACHE": str(cache)}
    given = WorkerConfig(**{**CONFIG.__dict__, "token": "sdt_given"})
    assert asyncio.run(with_own_token(given, env)) is given
    cache.write_text(json.dumps({"worker_id": "w-1", "token": "sdt_cached"}))
    assert asyncio.run(with_own_token(CONFIG, env)).token == "sdt_cached"


def test_a_cached_token_of_another_worker_id_is_not_used(tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    cache.write_text(json.dumps({"worker_id": "w-other", "token": "sdt_cached"}))
    env = {"SCHEDD_ENROLL_TOKEN": "sdt_enroll", "SCHEDD_WORKER_TOKEN_CACHE": str(cache)}
    # No registry listens at 127.0.0.1:1: the worker tries to enroll (rather than use the other
    # worker's token) and gives up.
    with pytest.raises(EnrollmentFailed, match="no registry answered"):
        asyncio.run(with_own_token(CONFIG, env, patience=0.0))


def test_the_cache_is_written_readable_by_its_owner_only(tmp_path: Path) -> None:
    cache = tmp_path / "cache.json"
    cache.write_text("{}")
    cache.chmod(0o644)
    write_cache(cache, "w-1", "sdt_new")
    assert cache.stat().st_mode & 0o777 == 0o600
    assert json.loads(cache.read_text()) == {"worker_id": "w-1", "token": "sdt_new"}
