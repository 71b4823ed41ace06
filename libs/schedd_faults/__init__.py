"""Named points where a test injects a fault into a real service process (see ``points``)."""

from schedd_faults.points import FaultPoints

__all__ = ["FaultPoints"]
