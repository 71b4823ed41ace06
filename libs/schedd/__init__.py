"""Generated protocol code of schedd (``make protos``). Do not edit."""
