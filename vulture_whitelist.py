"""Names vulture cannot see used: read by a framework, a serializer or SQL, or called only from bench/.

vulture (settings in pyproject.toml's [tool.vulture]) parses this file with the code it scans and never runs
it; each line below is a use of its name. A name goes here with the reason it is not dead. Decorated entry
points (FastAPI routes, pydantic validators) and names a framework looks up (Alembic's, pydantic's) are
ignored in the settings instead.
"""

from fastapi import FastAPI
from model2vec import StaticModel
from prometheus_client import values

from brain_api.routes import embeddings, entries, feed, health, ingest, vault
from brain_api.routes.markers import MarkerOut
from brain_cli.workers import _Workers
from brain_core.textsearch import Hit
from brain_kernel.db.models import Entry, FeedChange, FeedHorizon, FeedSnapshot, Injection, LearnedRoot, VaultDocument, VaultSearchState
from brain_kernel.identity.resolver import clear_git_caches
from brain_kernel.index.changes import SyncSummary
from brain_kernel.index.entries import ReindexSummary, entry_rows
from brain_kernel.log_format import JsonFormatter
from brain_kernel.search.embed_run import EmbedSummary
from brain_kernel.search.words import WordsDumper
from brain_kernel.settings import child_environment
from brain_mcp.answers import Feed, Ingest, KbBrief, KbSearch, SearchHit, Tick
from brain_ops.amygdala_watch import AmygdalaSummary
from brain_ops.backfill.summary import BackfillSummary
from brain_ops.keeper.tick import TickSummary
from brain_ops.scrub import ScrubSummary
from brain_ops.vault_sync import GitInit, GitSyncSummary

# Fields of the JSON summaries the commands print and of answers built from dataclasses (``as_dict``, which
# ``brain_core.jsonable`` writes from the fields): set by the job, read by whoever runs it.
AmygdalaSummary.acknowledged
AmygdalaSummary.alert_writes
BackfillSummary.scanned
EmbedSummary.pruned
Hit.tokens_matched
Hit.tokens_total
Hit.filename_match
ReindexSummary.keys_restored
GitInit.repository
GitSyncSummary.committed
GitSyncSummary.pulled
GitSyncSummary.pushed
ScrubSummary.scanned
ScrubSummary.secrets_removed
TickSummary.arcs_updated
TickSummary.feed_answers
TickSummary.llm_tick
TickSummary.scanned_files

# Fields of an HTTP answer: FastAPI serialises the model (or /openapi.json documents it).
MarkerOut.idempotent_replay
MarkerOut.body_mismatch
embeddings.Embedded.chunks_stored
embeddings.Embedded.dimensions
embeddings.Pruned.deleted
embeddings.Pruned.deleted_keys
entries.EntryView.adr
entries.EntryView.superseded_by
entries.HistoryEvent.recorded_at
feed.Feed.hash
health.Health.vault_mounted
health.Check.writable
health.Check.api_base
health.Check.model_dim
health.Check.dim_match
health.Check.http_status
health.Check.model_count
health.Check.classify_model_available
ingest.Ingested.obsidian_path
ingest.Ingested.semantic_text_preview
ingest.Ingested.classified_by
vault.VaultFile.size_bytes
vault.Snippet.snippet
vault.Signal.hash
vault.Signal.last_updated
vault.ArcFile.merged_from

# Fields of an MCP tool's output schema: pydantic writes the schema from the model and checks answers against it.
SearchHit.normalized_score
SearchHit.match_count
KbSearch.sources_searched
KbBrief.candidate_refs
Tick.waited_seconds
Feed.generated_at
Feed.entry_count
Ingest.chunks_sent
Ingest.total_chunks

# Columns that only SQL reads or fills (server defaults, raw statements), or that keep a row's history.
LearnedRoot.learned_at
FeedSnapshot.built
FeedSnapshot.built_xmin
FeedChange.xid
FeedHorizon.horizon
VaultDocument.name_lower
VaultDocument.name_grams
VaultSearchState.rebuilt_at
Entry.embedded_hash  # written by the embed runs' raw UPDATE (search.pending.mark_embedded)
Injection.text_served  # written by trial.records.record's insert values

# psycopg reads a dumper's oid and calls its dump (the chunk's words in the store's COPY).
WordsDumper.oid
WordsDumper.dump

# FastAPI calls ``app.openapi()`` for the schema; create_app replaces it.
FastAPI.openapi

# build_offline_embedder.py sets what StaticModel.save_pretrained writes into the model's config.
StaticModel.base_model_name
StaticModel.language

# Called by the benchmarks (bench/) as well as the tests: a fresh process's caches, a child's environment.
clear_git_caches
child_environment

# gunicorn calls its application's configuration hook (brain serve --workers N, ADR 0031).
_Workers.load_config

# Unused, in files whose rewrites are in flight (brain_kernel/index/ after ADR 0038): named here only so
# `make test` passes meanwhile. Each line goes when its owner deletes the name or uses it.
entry_rows  # only tests call it
SyncSummary.file_stats  # set, never read
SyncSummary.forgotten  # set, never read
# The search side of curation (ADR 0048): its SQL, for search to apply once its rewrite lands.
from brain_kernel.curation import states  # noqa: E402

states.withdrawn_chunk_sql
states.expired_chunk_sql

# prometheus_client reads its value class whenever a metric is built: process_metrics sets it for the workers' files.
values.ValueClass

# logging.config.dictConfig builds the JSON formatter from its dotted name (log_format.logging_config).
JsonFormatter
