"""Curation: supersede, retract and expire entries, recorded in the vault and read back from the index (ADR 0048)."""
