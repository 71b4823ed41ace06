"""schedctl, the command-line client of schedd. It talks only to the api over gRPC."""
