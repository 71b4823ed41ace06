"""Tracing is off unless the standard ``OTEL_*`` variables ask for it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from schedd_telemetry import tracing


@pytest.mark.parametrize(
    ("env", "exporter"),
    [
        ({}, ""),
        ({"OTEL_SERVICE_NAME": "x"}, ""),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317"}, "otlp"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4317"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "console"}, "console"),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, "otlp"),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317"}, ""),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317"}, ""),
        ({"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4317"}, "otlp"),
    ],
)
def test_which_exporter_the_environment_asks_for(env: dict[str, str], exporter: str) -> None:
    assert tracing.wanted(env) == exporter


def test_an_exporter_schedd_does_not_ship_is_refused() -> None:
    with pytest.raises(ValueError, match="OTEL_TRACES_EXPORTER"):
        tracing.wanted({"OTEL_TRACES_EXPORTER": "zipkin"})


def test_without_settings_nothing_is_configured_and_no_context_is_made() -> None:
    assert tracing.configure("schedd-test", {}) is False
    assert tracing.enabled() is False
    assert tracing.traceparent() == ""


def test_traceparent_strings_round_trip() -> None:
    value = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert tracing.parent(value) is not None
    assert tracing.parent("") is None
    assert tracing.parent("not-a-traceparent") is None


def test_untraced_processes_never_load_the_sdk() -> None:
    """Off, tracing costs an import of the API and one boolean test per traced operation: the SDK
    (span processors, exporters, their threads) is never imported."""
    code = (
        "import sys; from schedd_telemetry import tracing; "
        "assert tracing.configure('schedd-test', {}) is False; "
        "import schedd_registry.main, schedd_worker.main, schedd_api.main, schedd_scheduler.main; "
        "loaded = sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')); "
        "assert not loaded, loaded"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
