"""Read-only probes of the live machine and the Ray cluster."""
