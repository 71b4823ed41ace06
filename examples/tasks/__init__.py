"""Python task callables of the example DAGs, imported by workers from the repository root."""
