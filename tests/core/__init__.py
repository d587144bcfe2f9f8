"""Tests of brain_core: the pure domain, no database."""
