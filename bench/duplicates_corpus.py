"""The duplicates evaluation's hand-written lessons: minimal pairs of different facts, and rewordings of one fact.

The retrieval corpus (``bench.retrieval_corpus``) pairs entries about
different topics; none of them is one sentence with one word changed, which
is what an operator saw fold: "the session cookie name must be X" and "the
session cookie domain must be X" read as one lesson and the second was
hidden. These pairs are written the way agents write lessons, each pair one
sentence that says two different things by one change:

- ``substituted``: one content word swapped for another of the same slot
  (name/domain, read/write, staging/production, before/after, min/max);
- ``number``: a number changed, in digits or in words;
- ``negation``: a negation added ("do not retry" against "retry");
- ``added``: a content word added, which narrows or changes the fact.

``REWORDINGS`` are groups of one lesson written again in other words, as
agents and re-posting clients do: reordered, with other function words,
another inflection, a synonym, a clause added that restates the cause. The
first group is the five of tests/ops/test_repeated_lessons.py.
"""

from __future__ import annotations

MINIMAL_PAIRS: tuple[tuple[str, str, str], ...] = (
    # substituted: one content word for another of the same slot
    ("substituted", "The session cookie name must be the one the gateway sets, or logins loop.", "The session cookie domain must be the one the gateway sets, or logins loop."),
    ("substituted", "Raise the read timeout of the orders client; exports time out under load.", "Raise the write timeout of the orders client; exports time out under load."),
    ("substituted", "Run the schema migrations on staging before the release is tagged.", "Run the schema migrations on production before the release is tagged."),
    ("substituted", "Clear the CDN cache before the deploy, not from the deploy script.", "Clear the CDN cache after the deploy, not from the deploy script."),
    ("substituted", "Enable the feature flag for the new checkout in the admin console.", "Disable the feature flag for the new checkout in the admin console."),
    ("substituted", "The pool's min size decides how many connections idle between bursts.", "The pool's max size decides how many connections idle between bursts."),
    ("substituted", "The upload speed limit comes from the tenant's plan, not from the server.", "The download speed limit comes from the tenant's plan, not from the server."),
    ("substituted", "Log the request body of failed webhooks so support can replay them.", "Log the response body of failed webhooks so support can replay them."),
    ("swapped", "The client retries on a timeout; the server never does.", "The server retries on a timeout; the client never does."),
    ("substituted", "Reports read from the primary database; the lag broke the totals.", "Reports read from the replica database; the lag broke the totals."),
    ("substituted", "Sort the audit events ascending by time before paging them.", "Sort the audit events descending by time before paging them."),
    ("substituted", "Store timestamps in UTC and convert them in the browser.", "Store timestamps in local time and convert them in the browser."),
    ("substituted", "The firewall rule allows inbound traffic on the metrics port.", "The firewall rule allows outbound traffic on the metrics port."),
    ("substituted", "The avatars bucket is public so the CDN can serve the images.", "The avatars bucket is private so the CDN can serve the images."),
    ("swapped", "Push the tags first, then the branch, or the release job builds nothing.", "Push the branch first, then the tags, or the release job builds nothing."),
    ("substituted", "Merge the dependency bumps with a squash so the history stays readable.", "Merge the dependency bumps with a rebase so the history stays readable."),
    ("substituted", "The login page must be tested on mobile Safari before each release.", "The login page must be tested on desktop Safari before each release."),
    ("swapped", "Users sign in with their email address; the username is only for display.", "Users sign in with their username; the email address is only for display."),
    ("substituted", "The worker writes its progress to stdout and the supervisor parses it.", "The worker writes its progress to stderr and the supervisor parses it."),
    ("two changes", "The search endpoint takes its filters in a GET query string.", "The search endpoint takes its filters in a POST request body."),
    ("substituted", "The deploy config is YAML; the loader rejects anything else.", "The deploy config is JSON; the loader rejects anything else."),
    ("substituted", "Invoices are rounded up to the cent when the tax is applied.", "Invoices are rounded down to the cent when the tax is applied."),
    ("swapped", "The leader node owns the schedule; followers only run the jobs.", "The follower nodes own the schedule; the leader only runs the jobs."),
    ("substituted", "Image thumbnails are cropped to the width, then scaled.", "Image thumbnails are cropped to the height, then scaled."),
    ("substituted", "A major version bump of the SDK needs a migration note in the changelog.", "A minor version bump of the SDK needs a migration note in the changelog."),
    ("substituted", "The queue consumer acknowledges a message before processing it.", "The queue consumer acknowledges a message after processing it."),
    ("substituted", "Encrypt the export files with the tenant's key before uploading them.", "Sign the export files with the tenant's key before uploading them."),
    ("swapped", "The rate limiter counts requests per user, not per IP address.", "The rate limiter counts requests per IP address, not per user."),
    ("substituted", "Open the database transaction in the route handler, not in the service.", "Close the database transaction in the route handler, not in the service."),
    ("two changes", "The staging cluster scales down to zero at night to save costs.", "The staging cluster scales up at night to run the batch jobs."),
    ("two changes", "Access tokens are refreshed by the browser when a request fails with an expired token.", "Refresh tokens are rotated by the browser when a request fails with an expired token."),
    ("substituted", "The importer skips rows with an empty email and logs their line numbers.", "The importer rejects rows with an empty email and logs their line numbers."),
    ("substituted", "Run the linter on the changed files only; the full run takes too long in CI.", "Run the type checker on the changed files only; the full run takes too long in CI."),
    ("substituted", "Lock the inventory row when reserving stock, or two orders take the last item.", "Lock the inventory table when reserving stock, or two orders take the last item."),
    ("substituted", "The mobile app caches the feed for an hour when offline.", "The mobile app caches the feed for a day when offline."),
    ("substituted", "Compare the usernames in lowercase; the identity provider changes their case.", "Compare the usernames in uppercase; the identity provider changes their case."),
    ("substituted", "The report query needs an inner join on accounts, or deleted accounts show up.", "The report query needs a left join on accounts, or deleted accounts show up."),
    ("substituted", "Indent the generated YAML with spaces; the parser of the old agents chokes otherwise.", "Indent the generated YAML with tabs; the parser of the old agents chokes otherwise."),
    ("substituted", "The export job compresses the archive with gzip before sending it.", "The export job compresses the archive with zstd before sending it."),
    # number: a figure changed, in digits or in words
    ("number", "The payments client retries 3 times before it gives up on a charge.", "The payments client retries 5 times before it gives up on a charge."),
    ("number", "Keep the request timeout at 30 seconds; the load balancer cuts at 60.", "Keep the request timeout at 45 seconds; the load balancer cuts at 60."),
    ("number", "Run two replicas of the search indexer so a deploy never stops indexing.", "Run three replicas of the search indexer so a deploy never stops indexing."),
    ("number", "Backups are kept for seven days and then pruned by the runner.", "Backups are kept for thirty days and then pruned by the runner."),
    ("number", "The upload limit is 10 MB per file; larger files go through the resumable API.", "The upload limit is 100 MB per file; larger files go through the resumable API."),
    ("number", "Page the on-call engineer when the error rate stays above one percent for five minutes.", "Page the on-call engineer when the error rate stays above five percent for five minutes."),
    ("number", "Postgres 15 is the oldest version the migrations support.", "Postgres 14 is the oldest version the migrations support."),
    ("number", "The worker processes one job at a time; more caused lock waits.", "The worker processes four jobs at a time; more caused lock waits."),
    ("number", "Passwords need at least twelve characters since the audit.", "Passwords need at least eight characters since the audit."),
    ("number", "The nightly export starts at 2 am UTC so it misses the European peak.", "The nightly export starts at 4 am UTC so it misses the European peak."),
    ("number", "Sessions expire after two weeks without a visit.", "Sessions expire after two days without a visit."),
    ("number", "The thumbnail service keeps the first frame of a video as its poster.", "The thumbnail service keeps the second frame of a video as its poster."),
    # negation: one says not, the other says it
    ("negation", "Do not retry failed uploads; the client resumes them itself.", "Retry failed uploads; the client resumes them itself."),
    ("negation", "Never cache the login page at the CDN.", "Always cache the login page at the CDN."),
    ("negation", "The importer must not follow symlinks inside the upload folder.", "The importer must follow symlinks inside the upload folder."),
    ("negation", "Don't squash the migration commits when merging the release branch.", "Squash the migration commits when merging the release branch."),
    ("negation", "The webhook handler is idempotent, so replays are safe.", "The webhook handler is not idempotent, so replays are unsafe."),
    ("swapped", "Feature flags are evaluated on the server, not in the browser.", "Feature flags are evaluated in the browser, not on the server."),
    ("negation", "The CI cache is shared between branches.", "The CI cache is not shared between branches."),
    ("negation", "The scheduler can run two copies of a job at once.", "The scheduler cannot run two copies of a job at once."),
    ("negation", "Run the integration tests with the network disabled.", "Run the integration tests without the network disabled."),
    ("negation", "The staging database has real customer data, so treat dumps as secret.", "The staging database has no real customer data, so dumps can be shared."),
    ("negation", "Restart the queue workers after changing the broker settings.", "No need to restart the queue workers after changing the broker settings."),
    ("negation", "The search index is rebuilt on deploy.", "The search index is never rebuilt on deploy."),
    # added: a content word that narrows or changes the fact
    ("added", "Clear the cache after each deploy of the storefront.", "Clear the CDN cache after each deploy of the storefront."),
    ("added", "Run the migrations before starting the API in a new environment.", "Run the data migrations before starting the API in a new environment."),
    ("added", "Admins can export the billing reports from the console.", "Only admins can export the billing reports from the console."),
    ("added", "The token expires after an hour; the client must refresh it.", "The refresh token expires after an hour; the client must refresh it."),
    ("added", "Pin the driver version in the lockfile; upgrades broke bulk inserts.", "Pin the driver major version in the lockfile; upgrades broke bulk inserts."),
    ("added", "Rotate the keys every quarter and record the rotation in the audit log.", "Rotate the signing keys every quarter and record the rotation in the audit log."),
    ("added", "Emails to customers go through the relay, which adds the unsubscribe header.", "Marketing emails to customers go through the relay, which adds the unsubscribe header."),
    ("added", "Tests that touch the clock must freeze it.", "Tests that touch the clock or the timezone must freeze it."),
    ("added", "The exporter writes the rows in batches to keep memory flat.", "The exporter writes the rows in small batches to keep memory flat."),
    ("added", "Deleting a project removes its webhooks too.", "Deleting a project removes its webhooks and its API keys too."),
    ("added", "The release job publishes the Docker image to the registry.", "The release job publishes the Docker image to the internal registry."),
    ("added", "Check the lockfile into the repository.", "Check the lockfile into the repository for applications."),
)  # fmt: skip

REWORDINGS: tuple[tuple[str, ...], ...] = (
    (
        "Freeze time in auth tests; a moving clock makes them flake.",
        "Flaky auth tests: the clock advances mid-test. Fix by pinning the clock.",
        "Pin the clock in the auth tests, otherwise they flake as time moves on.",
        "Auth tests are flaky because the clock moves between calls: freeze the clock in those tests.",
        "The auth tests flake when the clock moves; pin the clock in every auth test.",
    ),
    (
        "The session cookie domain must match the gateway's, or logins loop.",
        "Logins loop when the session cookie domain differs from the gateway's domain.",
        "Set the session cookie domain to the gateway's; a different domain makes logins loop.",
        "Login loop: the session cookie's domain did not match the gateway's. Match them.",
    ),
    (
        "Raise the read timeout of the orders client; exports time out under load.",
        "Exports time out under load because the orders client's read timeout is too low; raise it.",
        "Under load the exports timed out: the orders client needs a higher read timeout.",
        "The orders client read timeout is too short for exports under load, so raise it.",
    ),
    (
        "Run the schema migrations on staging before the release is tagged.",
        "Before tagging a release, run the schema migrations on staging.",
        "Schema migrations go to staging first, before the release tag.",
        "Tag the release only after the schema migrations ran on staging.",
    ),
    (
        "Do not retry failed uploads; the client resumes them itself.",
        "Failed uploads need no retry: the client resumes them on its own.",
        "The client resumes failed uploads by itself, so do not retry them.",
        "Don't retry a failed upload, the client already resumes it.",
    ),
    (
        "Pin the database driver version; the last minor upgrade broke bulk inserts.",
        "Bulk inserts broke after a minor upgrade of the database driver, so pin its version.",
        "The database driver must stay pinned: a minor upgrade broke the bulk inserts.",
        "Keep the database driver version pinned since a minor upgrade broke bulk inserts.",
        "Pin the DB driver version; bulk inserts broke on the last minor upgrade.",
    ),
    (
        "The payments client retries 3 times before it gives up on a charge.",
        "Charges are retried 3 times by the payments client before it gives up.",
        "After 3 retries the payments client gives up on a charge.",
        "The payments client gives up on a charge after retrying it 3 times.",
    ),
    (
        "Lock the inventory row when reserving stock, or two orders take the last item.",
        "Two orders took the last item because reserving stock did not lock the inventory row.",
        "Reserving stock must lock the inventory row; otherwise two orders can take the last item.",
        "When stock is reserved, lock its inventory row so two orders cannot both take the last item.",
    ),
    (
        "Feature flags are evaluated on the server, not in the browser.",
        "Evaluate feature flags on the server; the browser never evaluates them.",
        "The server evaluates the feature flags, the browser does not.",
        "Feature flag evaluation happens server-side, never in the browser.",
    ),
    (
        "Clear the CDN cache after each deploy of the storefront.",
        "After every storefront deploy, clear the CDN cache.",
        "Each storefront deploy must be followed by clearing the CDN cache.",
        "The CDN cache has to be cleared after each deploy of the storefront.",
        "Clear the CDN cache after every deploy of the storefront.",
    ),
    (
        "Store timestamps in UTC and convert them in the browser.",
        "Timestamps are stored in UTC; the browser converts them.",
        "Keep stored timestamps in UTC and let the browser convert them for display.",
        "Convert timestamps in the browser and store them in UTC.",
    ),
    (
        "The webhook handler is idempotent, so replays are safe.",
        "Replaying webhooks is safe because the handler is idempotent.",
        "Since the webhook handler is idempotent, replays are safe.",
        "Webhook replays are safe: the handler is idempotent.",
    ),
    (
        "Run the linter on the changed files only; the full run takes too long in CI.",
        "In CI, lint only the changed files, since the full lint run takes too long.",
        "The full linter run is too slow for CI, so run it on the changed files only.",
        "Only the changed files get linted in CI; running the linter on everything takes too long.",
    ),
    (
        "Backups are kept for seven days and then pruned by the runner.",
        "The backup runner prunes backups after seven days.",
        "The runner keeps backups for seven days, then prunes them.",
        "Backups older than seven days are pruned by the runner.",
    ),
)  # fmt: skip
