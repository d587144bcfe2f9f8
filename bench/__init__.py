"""Benchmarks that print their figures; run each as ``python -m bench.<name>`` from the repository root."""
