"""Tests of the brain command."""
