"""The scheduler service: every replica campaigns in etcd; the leader turns runs into queued tasks."""
