"""The backfill of projects onto existing arcs."""
