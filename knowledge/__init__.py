"""The knowledge base over references/: the failure-mode catalog and the markdown references, loaded and searched."""
