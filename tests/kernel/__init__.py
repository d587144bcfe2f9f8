"""Tests of brain_kernel against a real Postgres."""
