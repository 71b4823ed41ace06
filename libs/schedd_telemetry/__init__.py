"""What every schedd service shares to be observed: tracing set up from the standard ``OTEL_*``
environment, trace context carried as W3C ``traceparent`` strings, JSON log lines, and the
Prometheus ``/metrics`` endpoint with bounded label values. See ``docs/observability.md``."""
