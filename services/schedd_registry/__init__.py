"""The registry service: workers connect here and pull task assignments over one stream each."""
