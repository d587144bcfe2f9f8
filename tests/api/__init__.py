"""Tests of the HTTP API through the real app."""
