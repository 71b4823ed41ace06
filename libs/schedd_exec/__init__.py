"""Running task attempts: shell commands in subprocesses and Python callables in warm child processes.

Shared by the worker service and the scheduler's local and sequential executors.
"""
