"""The api service: the public gRPC surface. Stateless; writes user intent, never schedules."""
