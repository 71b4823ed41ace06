"""Root conftest: fixtures live in ``tests/fixtures/*.py`` and are registered here as plugins."""

pytest_plugins = ["tests.fixtures.infra", "tests.fixtures.services"]
