"""The pure domain core of the brain kernel.

Identity rules, vault formats, feed assembly, heat scoring and merge planning
live here as functions over plain values. Nothing in this package performs
I/O: no database, network, subprocess or file access (tests/test_architecture.py
fails if it does). Adapters in ``brain_kernel``, ``brain_api`` and ``brain_ops``
gather evidence and persist results around it.
"""
