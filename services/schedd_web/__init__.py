"""The web UI of schedd: server-rendered pages that talk to the api with each user's own token."""
