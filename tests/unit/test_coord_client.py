"""schedd_coord.client helpers: etcd endpoint parsing and prefix range ends."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from schedd_coord.client import parse_endpoints, prefix_end


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("localhost:2379", ["localhost:2379"]),
        ("a:2379,b:2380", ["a:2379", "b:2380"]),
        (" a:2379 , b:2380 ", ["a:2379", "b:2380"]),
        ("http://a:2379,http://10.0.0.2:2379", ["a:2379", "10.0.0.2:2379"]),
        ("a:2379,,b:1,", ["a:2379", "b:1"]),
        ("[::1]:2379", ["[::1]:2379"]),
        ("https://a:2379,https://b:2379", ["a:2379", "b:2379"]),
    ],
)
def test_parse_endpoints(raw: str, expected: list[str]) -> None:
    assert parse_endpoints(raw) == expected


@pytest.mark.parametrize("bad", ["localhost", ":2379", "a:", "a:port", "a:23 79", "a:-1", "host:2379x"])
def test_malformed_endpoint_is_named(bad: str) -> None:
    with pytest.raises(ValueError, match="is not host:port") as info:
        parse_endpoints(f"ok:2379,{bad}")
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("raw", ["https://a:2379,http://b:2379", "https://a:2379,b:2379"])
def test_mixed_schemes_are_refused(raw: str) -> None:
    with pytest.raises(ValueError, match="mix"):
        parse_endpoints(raw)


def test_unknown_scheme_is_named() -> None:
    with pytest.raises(ValueError, match="'grpc://a:1'"):
        parse_endpoints("grpc://a:1")


@pytest.mark.parametrize("raw", ["", " ", ",", " , ,"])
def test_no_endpoints(raw: str) -> None:
    with pytest.raises(ValueError, match="no etcd endpoints"):
        parse_endpoints(raw)


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"a", b"b"),
        (b"/schedd/leader/", b"/schedd/leader0"),
        (b"ab\xff", b"ac"),
        (b"a\xff\xff", b"b"),
        (b"\x00", b"\x01"),
        (b"\xff", b"\x00"),
        (b"\xff\xff", b"\x00"),
        (b"", b"\x00"),  # etcd: from the key to the end of the keyspace
    ],
)
def test_prefix_end(prefix: bytes, end: bytes) -> None:
    assert prefix_end(prefix) == end


@settings(max_examples=300, deadline=None)
@given(st.binary(min_size=1, max_size=6), st.binary(max_size=8))
def test_prefix_range_covers_exactly_the_keys_with_the_prefix(prefix: bytes, key: bytes) -> None:
    end = prefix_end(prefix)
    if end == b"\x00":  # all 0xff: the range is open-ended
        assert set(prefix) == {0xFF}
        in_range = key >= prefix
    else:
        in_range = prefix <= key < end
    assert in_range == key.startswith(prefix), (prefix, key, end)
    extended = prefix + key
    assert extended.startswith(prefix)
    assert end == b"\x00" or prefix <= extended < end
