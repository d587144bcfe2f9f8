"""Tests of the batch jobs in brain_ops."""
