"""NOTIFY payloads of run ids: under PostgreSQL's size limit, and decoded back exactly."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings, strategies as st

from schedd_store import channels
from schedd_store.channels import MAX_PAYLOAD, decode_ids, encode_ids


def _round_trip(ids: list[int]) -> list[int]:
    return [i for p in encode_ids(ids) for i in decode_ids(p)]


def test_limit_is_below_postgresqls() -> None:
    assert MAX_PAYLOAD < 8000
    assert channels.RUNS != channels.QUEUED


def test_no_ids_no_payloads() -> None:
    assert encode_ids([]) == []


def test_few_ids_fit_one_payload() -> None:
    assert encode_ids([1, 22, 333]) == ["1,22,333"]
    assert decode_ids("1,22,333") == [1, 22, 333]


def test_accepts_any_iterable() -> None:
    assert encode_ids(iter(range(3))) == ["0,1,2"]
    assert encode_ids(i for i in (5, 6)) == ["5,6"]


@pytest.mark.parametrize(("payload", "ids"), [("", []), ("7", [7]), ("1,,2,", [1, 2]), ("-3,0", [-3, 0])])
def test_decode_tolerates_empty_items(payload: str, ids: list[int]) -> None:
    assert decode_ids(payload) == ids


def test_decode_rejects_garbage() -> None:
    with pytest.raises(ValueError):
        decode_ids("1,x")


def test_many_ids_are_split_and_each_payload_is_under_the_limit() -> None:
    ids = list(range(10**9, 10**9 + 5000))  # 10 digits each: 11 bytes with the comma
    payloads = encode_ids(ids)
    assert len(payloads) > 1
    assert all(len(p.encode()) < MAX_PAYLOAD for p in payloads)
    assert _round_trip(ids) == ids


def test_payloads_are_filled_exactly_to_the_limit() -> None:
    # 9 digits + comma = 10 bytes; 790 ids make 7899 bytes, the largest payload under 7900.
    assert MAX_PAYLOAD == 7900
    ids = list(range(100_000_000, 100_000_000 + 790 * 3))
    payloads = encode_ids(ids)
    assert [len(p) for p in payloads] == [7899, 7899, 7899]


def test_a_payload_of_exactly_the_limit_is_split() -> None:
    # 789 ids of 9 digits make 7889 bytes; one more 10-digit id would make exactly 7900.
    ids = [*range(100_000_000, 100_000_000 + 789), 1_000_000_000]
    payloads = encode_ids(ids)
    assert [len(p) for p in payloads] == [7889, 10]
    assert _round_trip(ids) == ids
    # One byte less fits.
    ids[-1] = 999_999_999
    assert [len(p) for p in encode_ids(ids)] == [7899]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), max_size=3000))
def test_round_trip_and_size(ids: list[int]) -> None:
    payloads = encode_ids(ids)
    assert all(p for p in payloads)
    assert all(len(p.encode()) < MAX_PAYLOAD for p in payloads)
    assert _round_trip(ids) == ids
    # Greedy: the next payload's first id would not have fit into the one before.
    for before, after in itertools.pairwise(payloads):
        assert len(before) + 1 + len(after.split(",")[0]) >= MAX_PAYLOAD
