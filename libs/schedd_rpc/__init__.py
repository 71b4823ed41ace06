"""Shared gRPC plumbing: error mapping, resource names, conversions and the server frame."""
