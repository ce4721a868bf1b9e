"""Knowledge as data: markdown references, the failure-mode catalog, JSON Schemas and sample inputs."""
