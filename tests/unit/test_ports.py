"""The dev stack's port picks (``schedd_devstack.ports``): below the kernel's ephemeral range, where
outgoing connections never take a port between its pick and the server's bind, and never one
port twice in a row within a process."""

from __future__ import annotations

import socket

from schedd_devstack import ports


def test_ports_are_picked_below_the_ephemeral_range_and_are_bindable() -> None:
    low, high = ports._pick_range()
    assert (low, high) != (0, 0)
    for _ in range(20):
        port = ports.free_port()
        if low < high:
            assert low <= port < high
        with socket.socket() as sock:
            sock.bind((ports.LOCALHOST, port))


def test_no_port_is_handed_out_twice_in_a_row() -> None:
    picked = [ports.free_port() for _ in range(200)]
    assert len(set(picked)) == len(picked)


def test_a_port_with_a_listener_is_not_free() -> None:
    with socket.socket() as sock:
        sock.bind((ports.LOCALHOST, ports.free_port()))
        sock.listen()
        taken = sock.getsockname()[1]
        assert not ports.port_is_free(taken)
    assert ports.port_is_free(taken)
