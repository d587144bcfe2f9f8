"""The vault's formats (pure): folder layout and path rules, the frontmatter codec, the marker
log entries, and the parsers that turn any vault file into index records.

The kernel's vault store (``brain_kernel.vault_store``) does the file I/O; every
name, path and byte format it reads or writes is decided here.
"""
