"""Ingest (UPSTREAM.md 1.9): a message and its references into inbox notes; ``service`` runs it, ``fetch`` fetches."""
