"""Counting refused calls per window, and capping streams: the pure logic, with a fake clock."""

from __future__ import annotations

import asyncio

import pytest

from schedd_auth.audit import AuditRecord
from schedd_core.errors import InvalidArgument
from schedd_rpc.refused_calls import ANY_PEER, RefusedCalls, peer_host, window_from_env
from schedd_rpc.stream_limits import IN_TOTAL_ENV, OverCap, StreamCaps, StreamLimits


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def refusal(peer: str = "ipv4:10.0.0.7:5000", method: str = "/schedd.v1.DagService/GetDag") -> AuditRecord:
    return AuditRecord(
        principal="-", role="", method=method, code="UNAUTHENTICATED", detail="no token", peer=peer
    )


def counting(clock: Clock, **kwargs: int) -> tuple[RefusedCalls, list[AuditRecord]]:
    written: list[AuditRecord] = []

    async def write(entry: AuditRecord) -> None:
        written.append(entry)

    return RefusedCalls(write, window_seconds=10, clock=clock, **kwargs), written


def test_the_first_refusal_of_a_window_is_written_and_the_rest_counted_in_one_row() -> None:
    async def scenario() -> list[AuditRecord]:
        clock = Clock()
        calls, written = counting(clock)
        for port in range(50):
            await calls.refused(refusal(peer=f"ipv4:10.0.0.7:{5000 + port}"))
        assert len(written) == 1
        clock.now += 10
        await calls.flush()
        await calls.close()
        return written

    first, summary = asyncio.run(scenario())
    assert (first.count, first.peer) == (1, "ipv4:10.0.0.7:5000")
    assert (summary.count, summary.peer) == (49, "ipv4:10.0.0.7")
    assert "49 more refused calls" in summary.detail and "no token" in summary.detail


def test_other_peers_and_methods_are_groups_of_their_own_up_to_the_bound() -> None:
    async def scenario() -> list[AuditRecord]:
        clock = Clock()
        calls, written = counting(clock, max_groups=2)
        for peer in ("ipv4:10.0.0.1:1", "ipv4:10.0.0.2:1", "ipv4:10.0.0.3:1", "ipv4:10.0.0.4:1"):
            await calls.refused(refusal(peer=peer))
        await calls.close()
        return written

    written = asyncio.run(scenario())
    assert [(w.peer, w.count) for w in written] == [
        ("ipv4:10.0.0.1:1", 1),
        ("ipv4:10.0.0.2:1", 1),
        ("ipv4:10.0.0.3:1", 1),
        (ANY_PEER, 1),
    ]


def test_a_new_window_writes_the_last_ones_count_and_its_own_first_row() -> None:
    async def scenario() -> list[AuditRecord]:
        clock = Clock()
        calls, written = counting(clock)
        await calls.refused(refusal())
        await calls.refused(refusal())
        clock.now += 11
        await calls.refused(refusal())
        await calls.close()
        return written

    assert [w.count for w in asyncio.run(scenario())] == [1, 1, 1]


def test_the_window_is_flushed_in_the_background_once_it_ends() -> None:
    async def scenario() -> list[AuditRecord]:
        written: list[AuditRecord] = []

        async def write(entry: AuditRecord) -> None:
            written.append(entry)

        calls = RefusedCalls(write, window_seconds=0.05)
        for _ in range(5):
            await calls.refused(refusal())
        for _ in range(200):  # bounded: 10 s
            if len(written) == 2:
                break
            await asyncio.sleep(0.05)
        await calls.close()
        return written

    assert [w.count for w in asyncio.run(scenario())] == [1, 4]


@pytest.mark.parametrize(
    ("peer", "host"),
    [
        ("ipv4:10.0.0.7:51234", "ipv4:10.0.0.7"),
        ("ipv6:[::1]:5000", "ipv6:[::1]"),
        ("unix:/tmp/s", "unix:/tmp/s"),
    ],
)
def test_a_peer_is_grouped_without_its_port(peer: str, host: str) -> None:
    assert peer_host(peer) == host


def test_window_settings_are_checked_by_name() -> None:
    assert window_from_env({}) == 60
    assert window_from_env({"SCHEDD_AUDIT_REFUSAL_WINDOW_SECONDS": "2.5"}) == 2.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(InvalidArgument, match="SCHEDD_AUDIT_REFUSAL_WINDOW_SECONDS"):
            window_from_env({"SCHEDD_AUDIT_REFUSAL_WINDOW_SECONDS": bad})


def test_streams_are_capped_per_principal_and_in_total_and_slots_come_back() -> None:
    limits = StreamLimits(StreamCaps(per_principal=2, in_total=3))
    with limits.take("a"), limits.take("a"):
        with pytest.raises(OverCap, match="2 streams per principal"):
            limits.take("a")
        with limits.take("b"), pytest.raises(OverCap, match="3 streams in total"):
            limits.take("c")
    with limits.take("a"), limits.take("a"), limits.take("c"):
        pass


def test_stream_caps_are_checked_by_name() -> None:
    assert StreamCaps.from_env({}) == StreamCaps(32, 1000)
    with pytest.raises(InvalidArgument, match=IN_TOTAL_ENV):
        StreamCaps.from_env({IN_TOTAL_ENV: "0"})
