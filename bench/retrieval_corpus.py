"""The retrieval evaluation's corpus and queries, generated deterministically (seeded) in code.

What agents write to the kernel, across 40 projects: lessons, decisions, arcs
(session summaries) and milestones. Each project draws 22 of the topics
below; one topic in one project (an *instance*) writes two to four entries
about the same fact (the lesson and the arc that found it, or the decision
and the milestone that shipped it), all relevant to a query about it. The
slots (a function name, a file path, an error text, a service) are drawn per
instance from pools that share words, so entries that look alike but mean
something else sit beside the right one:

- same words, another meaning: a token of an auth session against an LLM
  token budget; a lock in Postgres against a lockfile; a pool of
  connections against a pool of threads; a migration of a schema against a
  migration of a cluster; a cache of HTTP answers against a CI cache;
- same topic, another project: every topic recurs in several projects with
  other identifiers, paths and errors (what project scoping is for);
- near identifiers: ``parse_frontmatter`` beside ``parse_front_matter_v2``
  and ``render_frontmatter``; ``E1234`` beside ``E1243``.

Queries are of the five kinds sessions ask (ADR 0047): ``paraphrase``
(the fact in other words, written per topic to share few words with it),
``identifier`` (a function or class name alone or in a short phrase),
``error`` (a fragment of an error message), ``path`` (a file path), and
``decision`` ("what did we decide about X"). Each query names its project
(sessions search their own project) and the ids of its relevant entries.
The split into a tuning half and a held-aside half is fixed: by a hash of
the query's id, not by the generator's random stream, so adding a topic
does not move queries between halves.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field

SEED = 44
PROJECTS = 40
TOPICS_PER_PROJECT = 22
NOISE_PER_PROJECT = 8
NEAR_PER_PROJECT = 6
QUERY_KINDS = ("paraphrase", "identifier", "error", "path", "decision")
QUERIES_PER_KIND = {"paraphrase": 60, "identifier": 45, "error": 45, "path": 45, "decision": 45}

PROJECT_NAMES = [
    "billing-api", "docs-site", "infra-terraform", "mobile-app", "ml-pipeline", "auth-service", "search-indexer",
    "notify-worker", "data-lake", "admin-console", "payments-gateway", "chat-backend", "video-transcoder",
    "analytics-etl", "cli-toolkit", "feature-flags", "inventory-api", "geo-service", "crawler", "design-system",
    "ledger", "scheduler", "metrics-agent", "pdf-renderer", "email-relay", "kube-operator", "recsys",
    "storefront", "identity-sync", "backup-runner", "log-shipper", "rate-limiter", "graphql-gateway",
    "sandbox-runner", "translation-hub", "edge-proxy", "survey-app", "quota-service", "image-resizer", "audit-trail",
]  # fmt: skip

SERVICES = ["orders", "invoices", "users", "sessions", "reports", "uploads", "webhooks", "accounts", "exports", "events"]
DATES = [f"2026-{m:02d}-{d:02d}" for m in range(6, 12) for d in (2, 7, 11, 16, 20, 24, 28)]


@dataclass(frozen=True)
class Topic:
    """A fact agents write about, with the entries one instance writes and the queries that should find them.

    Templates use ``{ident}``, ``{path}``, ``{err}``, ``{svc}`` and ``{proj}``;
    ``idents``, ``paths`` and ``errs`` are the pools an instance draws from.
    ``subject`` is what a "what did we decide about" query names.
    """

    name: str
    entries: tuple[tuple[str, str, str], ...]  # (kind, title, body)
    paraphrases: tuple[str, ...]
    idents: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    errs: tuple[str, ...] = ()
    subject: str = ""
    ident_queries: tuple[str, ...] = ("{ident}",)
    path_queries: tuple[str, ...] = ("{path}",)
    err_queries: tuple[str, ...] = ("{err}",)


def T(name: str, *entries: tuple[str, str, str], para: tuple[str, ...], **kw: object) -> Topic:
    return Topic(name, tuple(entries), para, **kw)  # type: ignore[arg-type]


TOPICS: tuple[Topic, ...] = (
    T(
        "flaky-auth-test",
        ("lesson", "Auth test flakes on token expiry", "test_login_refresh in tests/{path} failed one run in ten: the session token expired between issue and check because the test read the wall clock. Freeze the clock with {ident} and the flake is gone."),
        ("arc", "Chasing the intermittent login test failure", "Summary: CI went red on the {svc} login suite about once a day. Reproduced with a loop of 50 runs, bisected to the token expiry check, fixed by freezing time via {ident}. The suite ran 200 times green after."),
        para=("flaky login test", "why does the sign-in test fail randomly in CI", "intermittent authentication test failure"),
        idents=("freeze_clock", "frozen_time", "pin_clock", "fake_now"),
        paths=("auth/test_login.py", "api/test_sessions.py", "test_auth_flow.py"),
        ident_queries=("{ident}", "where do we use {ident}"),
    ),
    T(
        "llm-token-budget",
        ("lesson", "Summaries cut off at the model's token budget", "The nightly summary of {svc} came back truncated: the prompt used 7,900 of the 8,192 tokens, leaving no room for the answer. Count tokens with {ident} before sending and trim the oldest turns first."),
        ("milestone", "Token budget guard shipped", "{ident} now caps prompts at 6,000 tokens for the summariser; truncated summaries dropped from 14% to 0."),
        para=("the generated summary stops mid sentence", "prompt too long for the language model context window"),
        idents=("count_tokens", "token_budget", "trim_prompt", "fit_context"),
        paths=("summarise/prompt.py", "llm/budget.py"),
        ident_queries=("{ident}",),
    ),
    T(
        "pgbouncer-prepared",
        ("lesson", "pgbouncer transaction mode breaks prepared statements", "Behind pgbouncer in transaction pooling, psycopg's automatic prepared statements fail with {err}. Set prepare_threshold=None in {path} for the {svc} service."),
        ("arc", "Database errors after moving to pgbouncer", "Summary: after routing {svc} through pgbouncer the API threw {err} under load. Root cause: server-side prepared statements do not survive transaction pooling. Disabled them in {path}; p95 unchanged."),
        para=("queries fail once we put the connection pooler in front of postgres", "statement does not exist after switching pooling mode"),
        errs=('prepared statement "_pg3_0" does not exist', 'prepared statement "_pg3_4" already exists', "DuplicatePreparedStatement"),
        paths=("db/engine.py", "config/database.py", "settings/db.py"),
    ),
    T(
        "thread-pool-starvation",
        ("lesson", "Thread pool starved by blocking calls", "The {svc} worker used a pool of 8 threads and every one sat in a blocking S3 download, so health checks timed out. Move downloads to {ident} with its own pool; the default pool stays for short tasks."),
        ("arc", "Worker stops answering health checks", "Summary: Kubernetes restarted the {svc} worker every few hours. py-spy showed all threads blocked in downloads. Split the pool: {ident} for I/O, default for CPU. No restart in a week."),
        para=("the worker hangs and kubernetes keeps restarting it", "background jobs block everything else"),
        idents=("download_executor", "io_pool", "BlockingPool", "offload_io"),
        paths=("worker/pools.py", "jobs/executor.py"),
    ),
    T(
        "connection-reset",
        ("lesson", "Retry on connection reset from the payment provider", "Calls to the provider fail with {err} when an idle keep-alive connection is reused after the provider closed it. Retry once with a fresh connection in {ident}; do not retry non-idempotent POSTs without an idempotency key."),
        ("arc", "Random failures calling the provider", "Summary: about 0.3% of {svc} calls failed with {err}. The provider drops idle connections after 60 s while our pool kept them 90 s. Lowered the keep-alive to 30 s and added one retry in {ident}."),
        para=("outgoing http calls fail now and then because the other side hung up", "stale keep-alive connections cause random request failures"),
        idents=("post_with_retry", "retrying_client", "send_request", "call_provider"),
        errs=("ConnectionResetError: [Errno 104] Connection reset by peer", "httpx.RemoteProtocolError: Server disconnected without sending a response", "urllib3.exceptions.ProtocolError: Connection aborted"),
        paths=("clients/provider.py", "integrations/http.py"),
        err_queries=("{err}", "{err} when calling the provider"),
    ),
    T(
        "alembic-config",
        ("decision", "Migrations run from one alembic.ini at the repository root", "Decision: one {path} for every environment; the database URL comes from the environment in env.py, never from the ini file. Why: two ini files drifted and staging ran a migration production never saw."),
        ("milestone", "Migrations unified", "Removed the second migrations folder; {path} is the only config and CI checks that heads are linear with {ident}."),
        para=("how are database schema changes configured across environments",),
        idents=("check_single_head", "alembic_heads_linear", "assert_one_head"),
        paths=("alembic.ini", "migrations/alembic.ini", "db/alembic.ini"),
        subject="the alembic config and migration setup",
    ),
    T(
        "schema-migration-lock",
        ("lesson", "ALTER TABLE waits on a long transaction and blocks everything", "A migration adding a column to {svc} took an ACCESS EXCLUSIVE lock, queued behind an analytics query, and every request queued behind it. Set lock_timeout = '5s' in {path} and retry the migration."),
        ("arc", "Outage during a schema change", "Summary: a 4-minute outage of {svc} while a migration waited for its lock. Added lock_timeout and a retry loop ({ident}); documented to run schema changes off-peak."),
        para=("a database change froze the whole site", "adding a column caused an outage"),
        idents=("migrate_with_lock_timeout", "retry_ddl", "safe_alter"),
        paths=("migrations/env.py", "db/migrate.py"),
        errs=("canceling statement due to lock timeout", "LockNotAvailable: could not obtain lock on relation"),
    ),
    T(
        "lockfile-drift",
        ("lesson", "The lockfile and pyproject disagree after a manual edit", "Someone edited {path} by hand and CI installed different versions than laptops. Regenerate the lock with {ident} and let CI fail when the lock is stale."),
        ("decision", "The lock file is generated, never edited", "Decision: {path} is only written by {ident}; a pre-commit hook checks it is current. Why: three incidents of drift in a month."),
        para=("ci installs other package versions than my machine", "dependencies differ between developer laptops and the build"),
        idents=("uv lock", "poetry lock --no-update", "pip-compile"),
        paths=("uv.lock", "poetry.lock", "requirements.lock", "package-lock.json"),
        subject="editing the dependency lock file",
    ),
    T(
        "advisory-lock-cron",
        ("decision", "Cron jobs take a Postgres advisory lock", "Decision: every scheduled job in {svc} takes pg_try_advisory_lock in {ident} and exits if another replica holds it. Why: two replicas sent every reminder email twice."),
        ("lesson", "Duplicate emails from two scheduler replicas", "With two replicas both ran the 09:00 job. The advisory lock in {ident} fixed it; remember the lock is per session, so keep the connection for the job's whole run."),
        para=("the scheduled job runs twice when we scale to two replicas", "avoid duplicate cron runs across instances"),
        idents=("run_exclusively", "with_job_lock", "singleton_job"),
        paths=("scheduler/jobs.py", "cron/runner.py"),
        subject="running scheduled jobs on several replicas",
    ),
    T(
        "frontmatter-parse",
        ("lesson", "Front matter with a colon in the title breaks parsing", "{ident} split on the first colon and dropped the rest of titles like 'Fix: auth'. Use a YAML parser for the front matter block; quote titles when writing."),
        ("arc", "Vault notes losing their titles", "Summary: notes whose title held a colon came back titled 'Fix'. Traced to {ident} in {path}; replaced the hand parser with yaml.safe_load and added a round-trip test."),
        para=("note titles get cut off after a colon", "yaml header of markdown files read wrong"),
        idents=("parse_frontmatter", "read_front_matter", "split_header", "load_meta_block"),
        paths=("vault/notes.py", "content/markdown.py", "docs/loader.py"),
        ident_queries=("{ident}", "{ident} bug", "who calls {ident}"),
    ),
    T(
        "frontmatter-render",
        ("milestone", "Front matter rendering is deterministic", "{ident} now sorts keys and always quotes strings, so rewriting a note no longer changes its diff. 1,200 notes rewritten with zero changes."),
        para=("rewriting notes produces noisy diffs",),
        idents=("render_frontmatter", "write_front_matter", "dump_header", "parse_front_matter_v2"),
        paths=("vault/render.py", "content/writer.py"),
    ),
    T(
        "http-cache",
        ("lesson", "Stale prices served from the HTTP cache", "The CDN cached /api/{svc} answers for an hour because responses had no Cache-Control. Send Cache-Control: private, max-age=0 from {ident}."),
        ("arc", "Customers see old prices", "Summary: price changes took an hour to show. The CDN cached API answers; added headers in {ident} and purged. Checked with curl -I against three edges."),
        para=("users see outdated data for an hour after we change it", "the cdn keeps serving old api responses"),
        idents=("no_store_middleware", "set_cache_headers", "CacheControlMiddleware"),
        paths=("api/middleware.py", "web/headers.py"),
    ),
    T(
        "ci-cache",
        ("lesson", "CI cache key missed the lockfile", "The CI cache was keyed on the branch only, so a dependency bump kept the old virtualenv. Key it on the hash of {path}."),
        ("milestone", "CI cache keyed on the lockfile", "Pipeline time down from 11 to 4 minutes with a cache hit rate of 92%; the key is hashFiles('{path}')."),
        para=("builds reuse outdated dependencies after an upgrade", "pipeline keeps old packages after bumping a version"),
        paths=(".github/workflows/ci.yml", ".gitlab-ci.yml", ".circleci/config.yml"),
    ),
    T(
        "oom-killed",
        ("lesson", "Exporter killed by the OOM killer on big accounts", "The {svc} export loaded all rows into memory and died with {err} for accounts over 2 million rows. Stream with server-side cursors in {ident}."),
        ("arc", "Exports failing for the largest customers", "Summary: exports of the biggest accounts vanished without a log line. kubectl describe showed {err}. Rewrote {ident} to stream 5,000 rows at a time; memory flat at 180 MB."),
        para=("the export job dies without any error for large customers", "process runs out of memory on big accounts"),
        idents=("stream_rows", "iter_export", "export_in_batches"),
        errs=("OOMKilled (exit code 137)", "Killed: 9", "MemoryError"),
        paths=("exports/csv.py", "jobs/export.py"),
    ),
    T(
        "disk-full",
        ("lesson", "Builds fail when the runner's disk fills", "Docker layers filled the self-hosted runner and builds failed with {err}. A nightly docker system prune -af on the runner keeps 40 GB free."),
        para=("build machine out of space", "no space left while building images"),
        errs=("ENOSPC: no space left on device", "OSError: [Errno 28] No space left on device", "write /var/lib/docker: no space left on device"),
        paths=("runner/cleanup.sh", "ops/prune.sh"),
    ),
    T(
        "esm-require",
        ("lesson", "A dependency went ESM-only", "After upgrading node-fetch to 3 the build failed with {err}. Either import() it dynamically or pin 2.x; we pinned 2.7 in {path} until the move to ESM."),
        ("decision", "Stay on CommonJS until the Node 22 upgrade", "Decision: keep CommonJS; pin ESM-only packages to their last CJS release in {path}. Why: the ESM switch touches 300 files and blocks the release."),
        para=("build broke after upgrading a javascript package", "module system mismatch after a dependency update"),
        errs=("Error [ERR_REQUIRE_ESM]: require() of ES Module", "SyntaxError: Cannot use import statement outside a module"),
        paths=("package.json", "frontend/package.json"),
        subject="moving the javascript code to ES modules",
    ),
    T(
        "error-code-lint",
        ("lesson", "Linter error {err} on generated files", "flake8 reported {err} on the generated protobuf modules. Exclude the generated folder in {path} rather than adding noqa to generated code."),
        para=("the linter complains about generated code",),
        errs=("E1234", "E501 line too long", "W605 invalid escape sequence", "F401 imported but unused"),
        paths=("setup.cfg", ".flake8", "pyproject.toml"),
        err_queries=("{err}", "{err} in generated files"),
    ),
    T(
        "error-code-api",
        ("decision", "API errors carry stable codes", "Decision: every 4xx from {svc} carries a code like {err} documented in {path}; messages may change, codes never. Why: the mobile app matched on message text and broke on a typo fix."),
        ("milestone", "Error codes documented", "All 48 error codes of {svc} are listed in {path}; the client maps {err} to a retry prompt."),
        para=("clients break when we reword an error message",),
        errs=("E1243", "E4001", "E2210", "ERR_QUOTA_EXCEEDED"),
        paths=("docs/errors.md", "api/errors.py"),
        subject="error codes in the public API",
    ),
    T(
        "deadlock-retry",
        ("lesson", "Deadlocks between the two writers of the same rows", "Two workers updated {svc} rows in different orders and Postgres aborted one with {err}. Sort ids before updating; retry the transaction once in {ident}."),
        ("arc", "Sporadic transaction aborts in the worker", "Summary: the worker logged {err} a few times an hour. Lock order differed between the batch update and the webhook handler. Sorted by id in both; zero since."),
        para=("two jobs updating the same table abort each other", "database transactions killed by lock ordering"),
        idents=("update_in_id_order", "retry_serializable", "with_deadlock_retry"),
        errs=("deadlock detected", "SQLSTATE 40P01", "psycopg.errors.DeadlockDetected"),
        paths=("worker/batch.py", "db/tx.py"),
    ),
    T(
        "unique-violation",
        ("lesson", "Double submit creates duplicate rows", "A double click sent two POSTs and the second failed with {err} that surfaced as a 500. Catch it in {ident} and return the existing row with 200."),
        para=("double clicking the submit button gives a server error", "second identical request crashes on a duplicate key"),
        idents=("create_or_get", "upsert_order", "insert_idempotent"),
        errs=("psycopg.errors.UniqueViolation: duplicate key value violates unique constraint", "IntegrityError: UNIQUE constraint failed"),
        paths=("api/orders.py", "handlers/create.py"),
    ),
    T(
        "timezone-reports",
        ("lesson", "Daily reports off by one day for US customers", "{ident} grouped by date in UTC, so evening orders in New York landed on the next day. Group by the account's timezone with AT TIME ZONE."),
        ("arc", "Report totals disagree with the dashboard", "Summary: US customers saw daily totals differ from the dashboard. {ident} used UTC dates; switched to the account timezone and backfilled 90 days."),
        para=("daily numbers land on the wrong day for american users", "reports split days at the wrong hour"),
        idents=("daily_totals", "group_by_day", "bucket_by_date"),
        paths=("reports/daily.py", "analytics/rollup.sql"),
    ),
    T(
        "retry-policy",
        ("decision", "Retries: exponential backoff with jitter, max 5", "Decision: outgoing calls from {svc} retry with exponential backoff and full jitter, at most 5 tries, via {ident}. Why: fixed 1 s retries synchronised clients into a thundering herd after the last outage."),
        para=("how should failed outgoing requests be repeated",),
        idents=("backoff_policy", "RetryPolicy", "with_backoff"),
        paths=("common/retry.py", "lib/backoff.py"),
        subject="the retry policy",
    ),
    T(
        "feature-flag-cleanup",
        ("decision", "Flags are removed within 30 days of full rollout", "Decision: a flag at 100% for 30 days is deleted; {ident} lists them weekly. Why: 140 dead flags made every test matrix slow."),
        ("milestone", "Removed 60 stale flags", "Deleted 60 flags that had been fully on since spring; test run time down 18%. {ident} now opens a ticket per stale flag."),
        para=("too many old toggles left in the code",),
        idents=("stale_flags_report", "list_dead_flags", "flag_janitor"),
        paths=("flags/registry.py", "config/flags.yaml"),
        subject="cleaning up feature flags",
    ),
    T(
        "helm-values",
        ("lesson", "Helm upgrade silently ignored a renamed value", "We renamed replicaCount to replicas in {path} but the chart still read replicaCount, so the upgrade kept 1 replica. helm template and diff before upgrade; schema-validate values with values.schema.json."),
        para=("kubernetes deployment kept the old replica count after an upgrade", "chart setting change had no effect"),
        paths=("charts/api/values.yaml", "deploy/values-prod.yaml", "helm/values.yaml"),
    ),
    T(
        "cluster-migration",
        ("milestone", "Moved {svc} to the new Kubernetes cluster", "The migration of {svc} to the eu-west-2 cluster finished: DNS switched, old node pool drained, no downtime. Runbook in {path}."),
        ("arc", "Cluster migration weekend", "Summary: moved {svc} between clusters over a weekend; the only snag was a missing secret, fixed by syncing with external-secrets. Runbook {path}."),
        para=("moving the service to other infrastructure",),
        paths=("runbooks/cluster-move.md", "ops/migration.md"),
        subject="the move to the new cluster",
    ),
    T(
        "vector-index",
        ("decision", "Exact search for small projects, HNSW above a threshold", "Decision: project-filtered search is exact below 20,000 rows and uses the index with a re-rank above it, in {ident}. Why: HNSW with a post-filter returned fewer than k results for small projects."),
        para=("why does similarity search sometimes return too few results",),
        idents=("choose_search_plan", "exact_or_index", "plan_knn"),
        paths=("search/plan.py", "index/knn.py"),
        subject="approximate nearest neighbour indexes",
    ),
    T(
        "embedding-dim",
        ("lesson", "Changing the embedding model needs a re-embed", "After switching the embedding model the search failed with {err}. Vectors of two models are not comparable: re-embed everything with {ident} when the model changes."),
        para=("search broke after we changed the embedding model",),
        idents=("reembed_all", "brain embed", "rebuild_vectors"),
        errs=("different vector dimensions 384 and 256", "expected 1536 dimensions, not 768"),
        paths=("search/embed.py", "ops/reembed.py"),
    ),
    T(
        "rate-limit-429",
        ("lesson", "GitHub API rate limit during the nightly sync", "The sync made 6,000 calls an hour and got {err}. Use conditional requests with ETags in {ident}; 304s do not count against the limit."),
        ("arc", "Nightly sync stops halfway", "Summary: the sync of {svc} stopped at about 60% each night with {err}. Added ETag caching in {ident}; calls down 85%."),
        para=("we hit the api quota during the nightly job", "too many requests to the upstream api"),
        idents=("fetch_with_etag", "conditional_get", "github_get"),
        errs=("HTTP 429 Too Many Requests", "403 API rate limit exceeded"),
        paths=("sync/github.py", "integrations/gh.py"),
    ),
    T(
        "tls-cert-expiry",
        ("lesson", "Internal certificate expired on a Sunday", "The internal CA's certificate for {svc} expired and every call failed with {err}. cert-manager now renews 30 days before; an alert fires at 14 days."),
        para=("calls between services failed because a certificate ran out",),
        errs=("SSL: CERTIFICATE_VERIFY_FAILED certificate has expired", "x509: certificate has expired or is not yet valid"),
        paths=("certs/issuer.yaml", "infra/cert-manager.yaml"),
    ),
    T(
        "env-file",
        ("decision", "Settings come from the environment, .env only for local runs", "Decision: {path} is read only when APP_ENV=local; containers get every setting from the environment. Why: a stale .env baked into an image overrode production secrets."),
        para=("where should configuration values come from in production",),
        paths=(".env", ".env.local", "config/.env.example"),
        idents=("load_settings", "Settings.from_env", "read_config"),
        subject="the .env file and configuration loading",
    ),
    T(
        "docker-compose-override",
        ("lesson", "docker compose picked up the override file in CI", "CI ran docker compose up and silently merged {path}, which mounted the source tree and hid the built image. Pass -f docker-compose.yml explicitly in CI."),
        para=("the container in ci runs local source instead of the built image",),
        paths=("docker-compose.override.yml", "compose.override.yaml"),
    ),
    T(
        "makefile-phony",
        ("lesson", "make test did nothing because a folder is named test", "A folder named test made 'make test' report up to date. Declare the target .PHONY in {path}."),
        para=("the test target says nothing to do",),
        paths=("Makefile", "build/Makefile"),
    ),
    T(
        "pytest-fixture-scope",
        ("lesson", "Session-scoped database fixture leaked rows between tests", "{ident} was session-scoped and tests saw each other's rows. Wrap each test in a transaction rolled back at teardown; keep only the engine session-scoped. See {path}."),
        para=("tests pass alone but fail when run together", "test isolation broken by shared database state"),
        idents=("db_session", "clean_db", "transactional_db"),
        paths=("tests/conftest.py", "conftest.py"),
    ),
    T(
        "n-plus-one",
        ("lesson", "N+1 queries on the orders list", "The orders page ran 1 + 200 queries: {ident} loaded customers lazily. selectinload(Order.customer) brought it to 2 queries and p95 from 900 to 120 ms."),
        ("arc", "Slow orders page", "Summary: the orders page took a second. SQL logging showed one query per row from {ident}; eager loading fixed it."),
        para=("the list page is slow because it queries once per row", "too many database round trips rendering a table"),
        idents=("list_orders", "OrderRepository.page", "orders_with_customers"),
        paths=("api/orders/list.py", "repositories/orders.py"),
    ),
    T(
        "secret-in-logs",
        ("lesson", "API keys printed in debug logs", "The request logger dumped headers including Authorization. {ident} now redacts Authorization, Cookie and any key ending in _token before logging."),
        para=("credentials showed up in the log output",),
        idents=("redact_headers", "scrub_secrets", "SafeLogFilter"),
        paths=("logging/filters.py", "app/logging.py"),
    ),
    T(
        "session-token-rotation",
        ("decision", "Refresh tokens rotate on every use", "Decision: each refresh issues a new refresh token and revokes the old one ({ident}); reuse of a revoked token logs out the whole family. Why: a leaked token stayed valid for 30 days."),
        para=("how long should a login stay valid after a credential leaks",),
        idents=("rotate_refresh_token", "issue_token_pair", "revoke_family"),
        paths=("auth/tokens.py", "identity/refresh.py"),
        subject="refresh token rotation",
    ),
    T(
        "gpu-oom-training",
        ("lesson", "Training crashed with CUDA out of memory at batch 64", "Fine-tuning hit {err} at batch 64. Gradient accumulation of 4 with batch 16 matches the result and fits in 24 GB."),
        para=("the model training crashes on the graphics card memory",),
        errs=("torch.cuda.OutOfMemoryError: CUDA out of memory", "RuntimeError: CUDA error: out of memory"),
        paths=("train/config.yaml", "training/finetune.py"),
    ),
    T(
        "pandas-dtype",
        ("lesson", "IDs lost precision through pandas floats", "A column with NaNs became float64 and 19-digit IDs lost their last digits. Read with dtype={{'id': 'Int64'}} in {ident}."),
        para=("large numeric ids come out slightly wrong after loading a csv",),
        idents=("load_events", "read_raw_csv", "ingest_frame"),
        paths=("etl/load.py", "pipeline/ingest.py"),
    ),
    T(
        "graphql-depth",
        ("decision", "GraphQL queries limited to depth 8", "Decision: the gateway rejects queries deeper than 8 and over a cost of 10,000 in {ident}. Why: a nested friends-of-friends query took the database down."),
        para=("protect the api from very expensive nested queries",),
        idents=("depth_limit_rule", "QueryCostValidator", "max_depth"),
        paths=("gateway/validation.py", "graphql/limits.py"),
        subject="limiting GraphQL query depth",
    ),
    T(
        "webhook-signature",
        ("lesson", "Webhook signature check failed after a body parser change", "Signatures are computed over the raw body; the JSON middleware re-serialised it and {ident} rejected every event with {err}. Verify before parsing."),
        para=("incoming webhooks rejected as invalid after an upgrade",),
        idents=("verify_signature", "check_hmac", "validate_webhook"),
        errs=("SignatureVerificationError", "401 invalid signature"),
        paths=("webhooks/verify.py", "api/hooks.py"),
    ),
    T(
        "search-tokenizer",
        ("lesson", "Full-text search could not find snake_case names", "to_tsvector('english') split {ident} oddly and stemmed the parts, so searching the name found nothing. Index identifiers with the simple configuration as well."),
        para=("searching for a function name in the docs returns nothing",),
        idents=("parse_frontmatter", "build_index", "load_config", "get_user_by_email"),
        paths=("search/fts.sql", "index/text.py"),
    ),
    T(
        "release-milestone",
        ("milestone", "Released v{ident}", "{proj} v{ident} is out: the {svc} endpoints are paginated, the CLI gained --json, and 14 bugs are fixed. Changelog in {path}."),
        para=("what shipped in the last release",),
        idents=("2.4.0", "1.12.3", "3.0.0", "0.9.1"),
        paths=("CHANGELOG.md", "docs/releases.md"),
        ident_queries=("v{ident}", "release {ident}"),
    ),
    T(
        "python-upgrade",
        ("decision", "Move to Python 3.12 in one step", "Decision: upgrade every service to Python 3.12 together, base image pinned in {path}. Why: two minor versions in production doubled the test matrix; 3.12 is 15% faster on our benchmarks."),
        ("milestone", "All services on Python 3.12", "The last two services moved to 3.12; {path} pins python:3.12-slim and the 3.11 CI jobs are gone."),
        para=("which interpreter version do we standardise on",),
        paths=("Dockerfile", "docker/base.Dockerfile", ".python-version"),
        subject="the Python version upgrade",
    ),
    T(
        "monorepo",
        ("decision", "Keep one repository for the API and the workers", "Decision: the API and workers stay in one repository with shared models in {path}. Why: splitting would need versioned model packages and three coordinated releases per schema change."),
        para=("should the backend be split into several git repositories",),
        paths=("shared/models.py", "libs/core/models.py"),
        subject="splitting the repository",
    ),
    T(
        "logging-format",
        ("decision", "Logs are JSON lines with a request id", "Decision: every service logs JSON lines with request_id, set by {ident} from the X-Request-ID header. Why: grepping plain text across 12 services took hours during incidents."),
        para=("how do we correlate log lines of one request across services",),
        idents=("RequestIdMiddleware", "bind_request_id", "log_context"),
        paths=("logging/config.py", "app/middleware.py"),
        subject="structured logging",
    ),
    T(
        "celery-visibility",
        ("lesson", "Long tasks executed twice by Celery with SQS", "Tasks longer than the SQS visibility timeout (30 min) were delivered again and ran twice. Set visibility_timeout to 2 h in {path} and make {ident} idempotent."),
        para=("a long background task runs a second time by itself",),
        idents=("rebuild_catalog", "generate_invoices", "sync_all_accounts"),
        paths=("celeryconfig.py", "worker/celery.py"),
    ),
    T(
        "s3-presigned",
        ("lesson", "Presigned upload URLs failed with SignatureDoesNotMatch", "The browser sent a Content-Type the URL was not signed for, and S3 answered {err}. Sign with the exact Content-Type in {ident}."),
        para=("file uploads from the browser rejected by storage",),
        idents=("presign_upload", "make_upload_url", "signed_put_url"),
        errs=("SignatureDoesNotMatch", "403 AccessDenied Request has expired"),
        paths=("uploads/s3.py", "storage/presign.py"),
    ),
    T(
        "node-memory-leak",
        ("lesson", "Memory leak from an event listener per request", "Each request added a listener to a shared emitter in {ident}; heap grew 40 MB an hour until {err}. Remove the listener in finally."),
        para=("the node server's memory keeps growing until it crashes",),
        idents=("attachProgressListener", "subscribeToUpdates", "onJobEvent"),
        errs=("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory", "MaxListenersExceededWarning: Possible EventEmitter memory leak detected"),
        paths=("server/events.ts", "src/progress.ts"),
    ),
    T(
        "typescript-strict",
        ("decision", "strictNullChecks on for new code", "Decision: {path} enables strict for new packages; old ones migrate folder by folder. Why: 40% of production errors last quarter were undefined property reads."),
        para=("how strict should the type checker be",),
        paths=("tsconfig.json", "packages/web/tsconfig.json"),
        subject="TypeScript strict mode",
    ),
    T(
        "dns-timeout",
        ("lesson", "Five-second stalls from DNS in Alpine containers", "musl's resolver queried A and AAAA in parallel over one socket and conntrack dropped one, giving 5 s stalls and {err}. Use single-request-reopen or a Debian base image."),
        para=("requests inside containers randomly pause for five seconds",),
        errs=("getaddrinfo EAI_AGAIN", "Temporary failure in name resolution"),
        paths=("Dockerfile", "deploy/resolv.conf"),
    ),
)  # fmt: skip

# Entries that belong to no topic: the everyday noise around the facts (never relevant, often close in words).
NOISE = (
    ("milestone", "Dependencies bumped", "Weekly dependency update for {svc}: 12 packages, tests green, no code changes."),
    ("arc", "Session: reading the {svc} code", "Summary: explored the {svc} module to plan the next change; no code changed. Notes on where tokens, locks and caches are handled."),
    ("lesson", "Run the formatter before committing", "Pre-commit runs ruff format; commit after it rewrites files, not before, or the hook fails twice."),
    ("milestone", "Docs refreshed", "README and the {svc} guide updated for the new configuration; screenshots redone."),
    ("arc", "Session: triaging issues", "Summary: went through 20 open issues for {svc}; closed 7 duplicates, labelled the rest. Nothing about errors reproduced."),
    ("lesson", "Prefer small pull requests", "Review time doubled for pull requests over 400 lines; split migrations from code changes."),
    ("decision", "Code review needs one approval", "Decision: one approving review is enough for {svc}; two for migrations and auth. Why: reviews waited a day for a second reviewer."),
    ("lesson", "Test data builders over fixtures files", "Building test rows with small builder functions made the {svc} tests readable; the 3,000-line JSON fixture is gone."),
    ("arc", "Session: pairing on the {svc} retry bug", "Summary: reproduced a report of slow retries but it was the client's own timeout of 2 s; nothing to change on our side."),
    ("milestone", "Coverage at 85%", "Line coverage of {svc} passed 85%; the login, cache and lock modules are fully covered."),
    ("decision", "Postgres for the queue, not Redis", "Decision: the {svc} job queue stays a Postgres table with SKIP LOCKED. Why: one database to back up, and 200 jobs a second is far below its limit."),
    ("lesson", "Read the error before retrying", "Three hours lost retrying a deploy whose first line said the config map was missing; read the first error, not the last."),
    ("arc", "Session: upgrading the test runner", "Summary: moved {svc} to the new test runner version; two plugins needed updates, no test changed."),
    ("lesson", "Token of the week: keep commit messages short", "Subjects over 72 characters get cut in the log view; put the figures in the body."),
)  # fmt: skip

# Near misses named in passing: an identifier, error or path close to a topic's, in an entry about something else.
NEAR = (
    ("milestone", "Removed dead helpers", "Deleted {near_ident} and two other helpers nobody calls since the refactor of {svc}."),
    ("lesson", "Noise in the logs", "{near_err} shows up in the {svc} logs during deploys; it is the old pod shutting down and can be ignored."),
    ("arc", "Session: moving files around", "Summary: moved {near_path} next to the code that reads it; no behaviour change in {svc}."),
)  # fmt: skip


@dataclass
class Entry:
    """One corpus entry: what the kernel would index (id, project, kind, title, text)."""

    id: str
    project: str
    kind: str
    title: str
    text: str
    topic: str = ""


@dataclass
class Query:
    """One query: its text, kind, project and the ids of its relevant entries; ``half`` is tune or held."""

    id: str
    project: str
    kind: str
    text: str
    relevant: list[str] = field(default_factory=list)

    @property
    def half(self) -> str:
        """The fixed split: a hash of the id, so the halves never move when the generator changes elsewhere."""
        return "held" if hashlib.sha256(self.id.encode()).digest()[0] % 2 else "tune"


@dataclass
class _Instance:
    project: str
    topic: Topic
    slots: dict[str, str]
    ids: list[str]


def _fill(template: str, slots: dict[str, str]) -> str:
    return template.format(**slots)


def build(seed: int = SEED) -> tuple[list[Entry], list[Query]]:
    """The corpus (entries) and the queries, the same for the same seed."""
    rng = random.Random(seed)
    entries: list[Entry] = []
    instances: list[_Instance] = []
    for p, project in enumerate(PROJECT_NAMES[:PROJECTS]):
        topics = rng.sample(TOPICS, TOPICS_PER_PROJECT)
        used_idents: set[str] = set()
        for t_idx, topic in enumerate(topics):
            # an identifier is unique within a project, so an identifier query has one right instance there
            idents = [i for i in topic.idents if i not in used_idents] or ["handle_" + topic.name.replace("-", "_")]
            slots = {
                "ident": rng.choice(idents),
                "path": rng.choice(topic.paths) if topic.paths else "README.md",
                "err": rng.choice(topic.errs) if topic.errs else "",
                "svc": rng.choice(SERVICES),
                "proj": project,
            }
            used_idents.add(slots["ident"])
            inst = _Instance(project, topic, slots, [])
            for e_idx, (kind, title, body) in enumerate(topic.entries):
                entry_id = f"{project}:{kind}:{p:02d}{t_idx:02d}{e_idx}"
                date = rng.choice(DATES)
                text = f"{_fill(title, slots)}\n\n[{date}] {_fill(body, slots)}"
                entries.append(Entry(entry_id, project, kind, _fill(title, slots), text, topic.name))
                inst.ids.append(entry_id)
            instances.append(inst)
        for n_idx, (kind, title, body) in enumerate(rng.sample(NOISE, NOISE_PER_PROJECT)):
            slots = {"svc": rng.choice(SERVICES)}
            entry_id = f"{project}:{kind}:{p:02d}n{n_idx}"
            entries.append(Entry(entry_id, project, kind, _fill(title, slots), f"{_fill(title, slots)}\n\n{_fill(body, slots)}"))
        mine = [inst for inst in instances if inst.project == project]
        for n_idx in range(NEAR_PER_PROJECT):
            inst = rng.choice(mine)
            kind, title, body = NEAR[n_idx % len(NEAR)]
            slots = {
                "svc": rng.choice(SERVICES),
                "near_ident": _near_ident(inst.slots["ident"], rng),
                "near_err": _near_err(rng),
                "near_path": _near_path(inst.slots["path"]),
            }
            entry_id = f"{project}:{kind}:{p:02d}m{n_idx}"
            entries.append(Entry(entry_id, project, kind, _fill(title, slots), f"{_fill(title, slots)}\n\n{_fill(body, slots)}"))
    return entries, _queries(rng, instances)


def _candidates(inst: _Instance, kind: str) -> list[str]:
    topic, slots = inst.topic, inst.slots
    # an identifier, error or path query only for an instance whose entries name it
    written = " ".join(title + " " + body for _, title, body in topic.entries)
    if kind == "paraphrase":
        return [_fill(q, slots) for q in topic.paraphrases]
    if kind == "identifier" and "{ident}" in written:
        return [_fill(q, slots) for q in topic.ident_queries]
    if kind == "error" and "{err}" in written:
        return [_fill(q, slots) for q in topic.err_queries]
    if kind == "path" and "{path}" in written:
        return [_fill(q, slots) for q in topic.path_queries]
    if kind == "decision" and topic.subject:
        return [f"what did we decide about {topic.subject}", f"what was the decision on {topic.subject}"]
    return []


def _queries(rng: random.Random, instances: list[_Instance]) -> list[Query]:
    queries: list[Query] = []
    for kind in QUERY_KINDS:
        pool = [(inst, text) for inst in instances for text in _candidates(inst, kind)]
        rng.shuffle(pool)
        seen: set[tuple[str, str]] = set()
        for inst, text in pool:
            if len([q for q in queries if q.kind == kind]) >= QUERIES_PER_KIND[kind]:
                break
            # one query per (project, text): the same words asked twice in one project would have two answers
            if (inst.project, text) in seen:
                continue
            seen.add((inst.project, text))
            # Relevant: every entry of the instance; for a path query, also any other instance of the project
            # naming the same file (asking for `Dockerfile` is answered by both).
            relevant = list(inst.ids)
            if kind == "path":
                relevant += [
                    i for other in instances if other is not inst and other.project == inst.project and inst.slots["path"] in _texts(other) for i in other.ids
                ]
            queries.append(Query(f"q-{kind}-{len(queries):03d}", inst.project, kind, text, relevant))
    return queries


def _texts(inst: _Instance) -> str:
    return " ".join(_fill(title, inst.slots) + " " + _fill(body, inst.slots) for _, title, body in inst.topic.entries)


# Errors that look like the topics' errors and are not: another errno, SQLSTATE, code or status.
NEAR_ERRS = (
    "ConnectionRefusedError: [Errno 111] Connection refused",
    "SQLSTATE 40001 could not serialize access",
    "E1324",
    "E4010",
    "HTTP 503 Service Unavailable",
    "Error [ERR_MODULE_NOT_FOUND]: Cannot find module",
    "OSError: [Errno 24] Too many open files",
    "psycopg.errors.ForeignKeyViolation",
    "x509: certificate signed by unknown authority",
)


def _near_ident(ident: str, rng: random.Random) -> str:
    """An identifier sharing most of ``ident``'s words: a legacy copy, a test of it, its async twin."""
    return rng.choice((f"{ident}_legacy", f"test_{ident}", f"{ident}_async", f"old_{ident}")) if ident.isidentifier() else "old_helpers"


def _near_err(rng: random.Random) -> str:
    return rng.choice(NEAR_ERRS)


def _near_path(path: str) -> str:
    """A path beside ``path``: the same folder, another file (or the same name in another folder)."""
    folder, _, name = path.rpartition("/")
    return f"{folder}/__init__.py" if folder else f"legacy/{name}"
