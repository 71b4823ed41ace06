"""The worker: pulls assignments from a registry over one stream and runs them."""
