#!/bin/sh
# The image's entry point: runs `brain` with the container's arguments. A leading "brain" is accepted, so
# `docker compose run --rm brain-ops brain backfill --dry-run` and `docker run IMAGE tick --no-ai` both work.
set -e
if [ "${1:-}" = "brain" ]; then
    shift
fi
exec brain "$@"
