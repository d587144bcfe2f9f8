"""Batch jobs of the brain kernel (extract, cluster, keeper tick, intent, reindex, backfill, embed).

Each job is a function over a settings value and a database session, safe to
rerun; the ``brain`` CLI wraps it with progress on stderr and a JSON summary.
"""
