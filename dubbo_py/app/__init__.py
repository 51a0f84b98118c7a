"""The application: the front door that serves providers and makes references, its registries,
start-up and observability wiring."""
