"""DAG files and task functions for ``tests/unit/test_sdk.py`` (loaded by path by the loader)."""
