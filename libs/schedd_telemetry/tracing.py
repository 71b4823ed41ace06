"""OpenTelemetry tracing, set up from the standard ``OTEL_*`` environment variables only.

Tracing is on when ``OTEL_TRACES_EXPORTER`` names an exporter (``otlp``, the default once any is
configured, or ``console``) or an OTLP endpoint is set (``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``), and off when none is set, when ``OTEL_TRACES_EXPORTER`` is
``none`` or when ``OTEL_SDK_DISABLED`` is ``true``. Off, no SDK is loaded: the OpenTelemetry API's
tracer is a no-op and :func:`enabled` is False, which callers check before doing any tracing work,
so an untraced service pays one boolean test per traced operation.

The exporter itself reads the rest of its settings (endpoint, headers, TLS, timeouts, batching:
``OTEL_BSP_*``) from the environment; ``OTEL_SERVICE_NAME`` overrides the service's own name.
Spans still buffered when the process exits are flushed at exit (best effort: a process killed
with SIGKILL loses them).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_PROPAGATOR = TraceContextTextMapPropagator()
_EXPORTERS = ("otlp", "console")
_enabled = False


def wanted(env: Mapping[str, str]) -> str:
    """The span exporter ``env`` asks for (``otlp`` or ``console``), or "" for no tracing.

    Raises ValueError for an exporter schedd does not ship."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ""
    exporter = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return ""
    if exporter:
        if exporter not in _EXPORTERS:
            raise ValueError(f"OTEL_TRACES_EXPORTER={exporter!r}: schedd ships {', '.join(_EXPORTERS)}, none")
        return exporter
    endpoints = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    return "otlp" if any(env.get(name, "").strip() for name in endpoints) else ""


def configure(service_name: str, env: Mapping[str, str] | None = None) -> bool:
    """Install a tracer provider for this process if the environment asks for tracing (see the
    module docstring); returns whether tracing is on. Call once, before any span is started."""
    global _enabled
    source = os.environ if env is None else env
    exporter = wanted(source)
    if not exporter:
        return False
    # The SDK is imported only when tracing is on.
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

    attributes = {} if source.get("OTEL_SERVICE_NAME", "").strip() else {SERVICE_NAME: service_name}
    provider = TracerProvider(resource=Resource.create(attributes))
    span_exporter: SpanExporter
    if exporter == "console":
        span_exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        span_exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(span_exporter))
    trace.set_tracer_provider(provider)
    _enabled = True
    return True


def enabled() -> bool:
    """Whether :func:`configure` turned tracing on in this process."""
    return _enabled


def tracer(name: str) -> trace.Tracer:
    return trace.get_tracer(name)


def traceparent(span: trace.Span | None = None) -> str:
    """The W3C ``traceparent`` of ``span`` (default: the current span), or "" when it is not
    recording a valid trace."""
    context = trace.set_span_in_context(span) if span is not None else None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier, context=context)
    return carrier.get("traceparent", "")


def parent(value: str) -> Context | None:
    """The context a ``traceparent`` string names, to start child spans in; None for "" or a value
    that is not a valid ``traceparent``."""
    if not value:
        return None
    context = _PROPAGATOR.extract({"traceparent": value})
    span_context = trace.get_current_span(context).get_span_context()
    return context if span_context.is_valid else None
