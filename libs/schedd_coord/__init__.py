"""Coordination through etcd: leases, leader election with fencing tokens, and membership.

Built directly on etcd's v3 gRPC API (the message and stub definitions come from
the ``aetcd`` package), so every call has an explicit deadline and every
election step is one etcd transaction.
"""
