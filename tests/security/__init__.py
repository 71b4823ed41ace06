"""Attack tests: each one tries what an actor must not be able to do (docs/threat-model.md) and
proves it is refused and changes nothing."""
