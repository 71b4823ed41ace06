"""Every size and count limit of schedd, in one place.

Each limit says in its docstring what it bounds, in which unit, and who enforces it. Where two
components check the same thing (the api and schedctl, the worker and the registry), both import the
limit from here, so they refuse at exactly the same size. Pure: constants and checks, no I/O.

Guaranteed: a value at a limit is accepted and one unit more is refused, by every component named.
Not guaranteed: that a component not named checks a limit at all (a limit is a promise of the ones
that enforce it, not of every reader).
"""

from __future__ import annotations

from schedd_core.errors import InvalidArgument

KIB = 1024
MIB = 1024 * KIB

# --- Identifiers ---------------------------------------------------------------------------------

MAX_ID_CHARS = 250
"""Longest id of a DAG, task, pool or run, and longest param or env name. Enforced by
``schedd_core.identifiers.check_id`` and ``schedd_core.spec`` (the spec's env names: the api, the SDK
and schedctl) and the web UI's trigger form."""

MAX_ENROLLED_WORKER_ID_CHARS = 200
"""Longest worker id that may enroll (its token's name has a prefix). Enforced by
``schedd_store.tokens.enroll``."""

MAX_REQUEST_ID_CHARS = 200
"""Longest idempotency key of a request. Enforced by ``schedd_store.requests``."""

# --- DAG specs -----------------------------------------------------------------------------------

MAX_SPEC_BYTES = 3 * MIB
"""Largest serialized DAG spec: it must fit, with room to spare, in the 4 MiB a default gRPC client
accepts in one response. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_SPEC_FILE_BYTES = 4 * MIB
"""Largest spec file schedctl reads (YAML or JSON). Enforced by ``schedctl.specfile``."""

MAX_TASKS = 10_000
"""Most tasks in one DAG. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_DEPTH = 1_000
"""Longest chain of dependent tasks in one DAG. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_COMMAND_BYTES = 64 * KIB
"""Longest shell command of a task (UTF-8). Enforced by ``schedd_core.spec.validate_spec``."""

MAX_RETRIES = 1_000
"""Most retries of a task. Enforced by ``schedd_core.spec.validate_spec``. The numeric bounds keep every
value a pass computes from them within a column."""

MAX_DURATION_SECONDS = 366 * 24 * 3600
"""Longest duration a spec may name (timeouts, retry delays, intervals). Enforced by
``schedd_core.spec.validate_spec``."""

MAX_PRIORITY_WEIGHT = 100_000
"""Largest priority weight of a task, either sign. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_CONCURRENCY = 1_000_000
"""Largest concurrency limit or pool slot count. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_PARAMS_BYTES = 64 * KIB
"""Largest params of a DAG or a task, serialized as the ``google.protobuf.Struct`` the spec carries.
Enforced by ``schedd_core.spec.validate_spec``."""

MAX_ENV_BYTES = 64 * KIB
"""Largest environment of a task (names and values, UTF-8). Enforced by
``schedd_core.spec.validate_spec``."""

MAX_DESCRIPTION_CHARS = 10_000
"""Longest description of a DAG. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_TAGS = 50
"""Most tags of a DAG. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_TAG_CHARS = 100
"""Longest tag. Enforced by ``schedd_core.spec.validate_spec``."""

MAX_CALLBACKS = 10
"""Most callbacks of one event (failure, retry, success) of a DAG or task. Enforced by
``schedd_core.spec.validate_spec``."""

MAX_URL_CHARS = 2_000
"""Longest webhook URL of a callback. Enforced by ``schedd_core.spec.validate_spec``."""

DEFAULT_MAX_MAP_LENGTH = 1024
"""Most mapped instances one task may expand to (the scheduler's ``max_map_length`` default; a run
whose mapping is longer fails the task). Enforced by ``schedd_core.planner``."""

# --- Runs ----------------------------------------------------------------------------------------

MAX_CONF_BYTES = MAX_PARAMS_BYTES
"""Largest conf of a run (or of a backfill's runs), in bytes of the ``google.protobuf.Struct`` the api
receives: as large as params may be, since a conf sets params. Enforced, in this one unit, by
``schedd_api.runs`` and ``schedd_api.backfills``, and by schedctl before it sends a conf
(``runs trigger``, ``backfill create``, ``dags test``), all through :func:`check_conf_bytes`."""

MAX_VALUE_DEPTH = 32
"""Deepest nesting of Struct and ListValue values (a conf, params) in a request. Enforced by
``schedd_rpc.hygiene`` on every request, and by schedctl before it parses a ``--conf``."""


def check_conf_bytes(size: int, field: str = "conf") -> None:
    """Raise InvalidArgument naming ``field`` when a conf of ``size`` serialized bytes is over
    :data:`MAX_CONF_BYTES`; the one check and message of the api and schedctl."""
    if size > MAX_CONF_BYTES:
        raise InvalidArgument(field, f"is {size} bytes; the limit is {MAX_CONF_BYTES}")


# --- Task results and output ---------------------------------------------------------------------

MAX_RESULT_BYTES = 64 * KIB
"""Largest value a task may return, in bytes of its JSON (UTF-8). Enforced by the worker's Python
child (``schedd_exec.python_child``, the limit ``schedd_exec.python_pool`` gives it) and again by the
registry (``schedd_registry.servicer``), which fails the attempt with the reason."""

MAX_ERROR_CHARS = 4000
"""Longest error message stored with an attempt or a run (longer ones are cut). Applied by the registry
and the scheduler's store calls."""

MAX_LOG_BYTES_PER_ATTEMPT = 4 * MIB
"""Most output bytes stored for one attempt; what comes after is dropped with a note. Enforced by
``schedd_store.dispatch.append_logs``; the worker's ``schedd_exec.attempt_log`` stops sending there."""

MAX_LOG_PIECE_CHARS = 64 * KIB
"""Most characters of output a worker sends in one log message. Kept by ``schedd_exec.attempt_log``."""

MAX_LOG_CHUNK_BYTES = 4 * MAX_LOG_PIECE_CHARS
"""Largest log message the registry stores: a piece of :data:`MAX_LOG_PIECE_CHARS` characters of at
most 4 bytes each. Enforced by ``schedd_registry.servicer`` (a larger one is ignored)."""

MAX_LOG_READ_BYTES = 1 * MIB
"""Most bytes of a task's log one ``GetTaskLogs`` call returns. Enforced by ``schedd_api.servicer``;
``schedctl tasks logs`` asks for this much at a time."""

# --- Messages and pages --------------------------------------------------------------------------

MAX_RECEIVE_BYTES = 4 * MIB
"""Default largest request a schedd server accepts (``SCHEDD_MAX_MESSAGE_BYTES`` changes it, within
:data:`MIN_RECEIVE_BYTES_SETTING` .. :data:`MAX_RECEIVE_BYTES_SETTING`). Enforced by gRPC, configured
by ``schedd_rpc.server``."""

MIN_RECEIVE_BYTES_SETTING = 64 * KIB
"""Smallest ``SCHEDD_MAX_MESSAGE_BYTES`` accepted. Checked by ``schedd_rpc.server``."""

MAX_RECEIVE_BYTES_SETTING = 64 * MIB
"""Largest ``SCHEDD_MAX_MESSAGE_BYTES`` accepted. Checked by ``schedd_rpc.server``."""

MAX_SEND_BYTES = 8 * MIB
"""Largest message a schedd server sends. Enforced by gRPC, configured by ``schedd_rpc.server``."""

MAX_ASSIGNMENT_BYTES = MAX_SEND_BYTES
"""Largest assignment the registry delivers to a worker (a larger one fails the attempt instead).
Enforced by ``schedd_registry.dispatcher``."""

WORKER_MAX_RECEIVE_BYTES = 2 * MAX_ASSIGNMENT_BYTES
"""Largest message a worker accepts from a registry: room for an assignment of
:data:`MAX_ASSIGNMENT_BYTES` and its envelope. Configured by ``schedd_worker.agent``."""

MAX_PAGE_SIZE = 1000
"""Most items one page of a list call returns (a larger ``page_size`` is lowered). Enforced by
``schedd_api.paging``; schedctl asks for pages of this size."""

MAX_PAGE_BYTES = 3 * MIB
"""Most serialized bytes of one page of a list call (fewer items are returned). Enforced by
``schedd_api.paging``."""

# --- Code bundles --------------------------------------------------------------------------------

MAX_ARCHIVE_BYTES = 16 * MIB
"""Largest code bundle archive (the tar, headers included). Enforced by schedctl when it packs one
(``schedd_exec.bundle_pack``), the api when it stores one and workers when they fetch one (both through
``schedd_core.bundle_archive``)."""

MAX_UNPACKED_BYTES = MAX_ARCHIVE_BYTES
"""Most bytes a bundle's files may total once unpacked (an archive of plain files is never larger);
the ceiling of ``SCHEDD_BUNDLE_MAX_UNPACKED_BYTES``. Enforced by ``schedd_core.bundle_archive``."""

MAX_ARCHIVE_FILES = 10_000
"""Most files in a code bundle; the ceiling of ``SCHEDD_BUNDLE_MAX_FILES``. Enforced by
``schedd_exec.bundle_pack`` and ``schedd_core.bundle_archive``."""
