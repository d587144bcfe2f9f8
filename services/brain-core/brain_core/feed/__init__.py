"""The feed every agent session reads at start (pure).

Two shapes share one envelope ``{hot_arcs, inject_blocks, entries,
generated_at, hash, entry_count, vault_root}`` whose entries are ``{id,
title, content, priority, ttl, severity, metadata}`` (``envelope``):

- the global feed (``GET /feed``): the keeper's files in ``brain-feed/``
  (``keeper_files``), unchanged for existing clients;
- the project feed (``GET /feed?project=P``, ``project``): built from index
  rows already filtered to P, plus fleet-wide signals and inject blocks, every
  entry labelled with its ``scope`` and ``project``.

``sections`` renders what both share (the hot arcs table, lesson and decision
bullets); ``intent`` writes the operator's intent, never cut mid-sentence.
"""
