"""The ``brain`` command: the entry point that wires settings, the database and the jobs together.

The top of the layering (core <- kernel <- {api, ops} <- cli, ADR 0011): each
command parses flags, builds the one settings object, opens the database when
it needs one and calls a library function of ``brain_kernel`` or
``brain_ops``; ``brain serve`` runs the ``brain_api`` app.
"""
