"""The Grafana dashboard and the autoscalers (KEDA's queries, the HPAs' External metric and the
prometheus-adapter rule behind it) name only series that schedd's services expose, read from the
services' metric definitions; the dashboard shows the autoscaling metric and each service's key
series."""

from __future__ import annotations

from tests.deploy import metric_names, sources


def test_the_dashboard_names_only_exposed_series() -> None:
    expressions = metric_names.dashboard_expressions(sources.dashboard())
    assert expressions
    assert metric_names.check_series("dashboard", expressions) == []


def test_the_dashboard_shows_demand_and_every_services_key_series() -> None:
    text = "\n".join(metric_names.dashboard_expressions(sources.dashboard()))
    for series in (
        "schedd_queue_demand",
        "schedd_queue_depth",
        "schedd_queue_running",
        "schedd_pool_slots",
        "schedd_task_queued_to_running_seconds_bucket",
        "schedd_task_outcomes_total",
        "schedd_task_duration_seconds_bucket",
        "schedd_scheduler_is_leader",
        "schedd_scheduler_fence_rejections_total",
        "schedd_scheduler_pass_seconds_bucket",
        "schedd_scheduler_schedule_delay_seconds_bucket",
        "schedd_api_requests_total",
        "schedd_api_request_seconds_bucket",
        "schedd_worker_slots",
        "schedd_worker_attempts_total",
        "schedd_registry_workers",
    ):
        assert series in text, series


def test_the_autoscalers_name_only_exposed_series() -> None:
    expressions = []
    for name in ("production", "production-hpa"):
        for m in sources.render(name):
            if m["kind"] == "ScaledObject":
                expressions += [t["metadata"]["query"] for t in m["spec"]["triggers"]]
            if m["kind"] == "HorizontalPodAutoscaler":
                expressions += [x["external"]["metric"]["name"] for x in m["spec"]["metrics"]]
    adapter = sources.load_yaml(sources.ADAPTER_VALUES_FILE)
    for rule in adapter["rules"]["external"]:
        expressions += [rule["seriesQuery"], rule["name"]["as"]]
    assert any("schedd_queue_demand" in e for e in expressions)
    assert metric_names.check_series("autoscalers", expressions) == []
