"""A registry's queue, pool and worker gauges are read when scraped (``schedd_registry.metrics``):
a scrape right after a change sees it, a queue once seen reads 0 when it empties, and a scrape
while the store is unreachable still answers, with the worker gauges only."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from schedd_devstack.ports import free_port
from schedd_registry.dispatcher import Dispatcher
from schedd_registry.metrics import SCRAPE_TIMEOUT, RegistryMetrics
from schedd_store.database import Engine
from schedd_store.engine import make_engine

from .helpers import finish_all_running, leading_loop, registered_run, spec

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Session:
    credits: int


@dataclass
class Sessions:
    """What the gauges read of a dispatcher: its sessions."""

    sessions: list[Session] = field(default_factory=list)


async def scrape(metrics: RegistryMetrics) -> Samples:
    """A scrape as the metrics server's thread makes it."""
    text = (await asyncio.to_thread(generate_latest, metrics.registry)).decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def gauges(engine: Engine, sessions: Sessions) -> RegistryMetrics:
    metrics = RegistryMetrics()
    dispatcher: Dispatcher = sessions  # type: ignore[assignment]  # only .sessions is read
    metrics.read_at_scrape(engine, dispatcher, asyncio.get_running_loop())
    return metrics


async def test_a_scrape_sees_the_store_and_the_workers_as_they_are(engine: Engine) -> None:
    sessions = Sessions([Session(credits=3), Session(credits=5)])
    metrics = gauges(engine, sessions)
    first = await scrape(metrics)
    assert first[("schedd_registry_workers", frozenset())] == 2
    assert first[("schedd_registry_free_slots", frozenset())] == 8
    assert not any(name == "schedd_queue_depth" for name, _ in first)

    run = await registered_run(engine, spec("gauged", {"a": []}))
    loop = await leading_loop(engine)
    assert await loop.evaluate([run.pk]) == 1
    default = frozenset({("queue", "default")})
    queued = await scrape(metrics)  # at once: nothing refreshes on a timer
    assert queued[("schedd_queue_depth", default)] == 1
    assert queued[("schedd_queue_demand", default)] == 1
    used = frozenset({("pool", "default_pool"), ("state", "used")})
    assert queued[("schedd_pool_slots", used)] == 1  # a queued task instance holds its pool slot

    assert await finish_all_running(engine) == ["a"]
    sessions.sessions.pop()
    emptied = await scrape(metrics)
    assert emptied[("schedd_queue_depth", default)] == 0  # still listed: autoscalers read 0
    assert emptied[("schedd_queue_running", default)] == 0
    assert emptied[("schedd_registry_workers", frozenset())] == 1


async def test_a_scrape_while_the_store_is_unreachable_answers_with_the_worker_gauges() -> None:
    unreachable = make_engine(f"postgresql+asyncpg://schedd@127.0.0.1:{free_port()}/schedd", pool_size=1)
    try:
        samples = await scrape(gauges(unreachable, Sessions([Session(credits=4)])))
    finally:
        await unreachable.dispose()
    assert samples[("schedd_registry_free_slots", frozenset())] == 4
    assert not any(name.startswith("schedd_queue_") for name, _ in samples)


async def test_a_scrape_after_the_event_loop_closed_answers_without_the_gauges(engine: Engine) -> None:
    closed = asyncio.new_event_loop()
    closed.close()
    metrics = RegistryMetrics()
    dispatcher: Dispatcher = Sessions([Session(credits=1)])  # type: ignore[assignment]
    metrics.read_at_scrape(engine, dispatcher, closed)
    samples = await scrape(metrics)  # no exception: the scrape answers with the other series
    assert not any(name.startswith(("schedd_queue_", "schedd_registry_workers")) for name, _ in samples)
    assert ("schedd_registry_assignments_total", frozenset()) in samples


async def test_a_scrape_gives_up_on_a_store_that_does_not_answer() -> None:
    """A server that accepts connections and never answers: the scrape still returns (after
    ``SCRAPE_TIMEOUT``), with none of these gauges, instead of hanging the metrics endpoint."""
    silent = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port = silent.sockets[0].getsockname()[1]
    hanging = make_engine(f"postgresql+asyncpg://schedd@127.0.0.1:{port}/schedd", pool_size=1)
    try:
        started = time.monotonic()
        samples = await scrape(gauges(hanging, Sessions([Session(credits=2)])))
        waited = time.monotonic() - started
    finally:
        silent.close()
        await hanging.dispose()
    assert waited < SCRAPE_TIMEOUT + 10  # a bound, not a measurement: without the timeout it hangs
    assert not any(name.startswith(("schedd_queue_", "schedd_registry_workers")) for name, _ in samples)
