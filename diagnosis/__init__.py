"""Diagnosis of failed or stuck runs: catalog signatures in logs, descriptions in prose, ranking and evidence."""
