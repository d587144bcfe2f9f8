"""The MCP server (``brain mcp``): upstream's tools for agents, answered by the kernel in-process.

``server`` builds the SDK server and its HTTP app (bearer tokens, ``/ping``);
``tools`` holds what each tool does over the kernel's repositories and
services; ``brief`` is the pure half of ``kb_brief`` (digest, prompt, refs).
It sits beside ``brain_api`` and ``brain_ops`` (ADR 0011): it imports the
core and the kernel only, and the ``brain`` CLI opens the database for it.
"""
