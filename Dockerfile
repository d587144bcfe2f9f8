# syntax=docker/dockerfile:1
# The kernel image: one image for the API (`brain serve`), the jobs (`brain migrate`, `brain ops-loop`,
# `brain tick`, ...), the MCP server (`brain mcp --http`) and the amygdala. compose.yml and charts/brain
# start it with the command each role needs; the default is the API. ADR 0019.

# -- build: install the project, pinned by constraints.txt, into a virtualenv of its own ----------------
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/brain
WORKDIR /src
COPY pyproject.toml constraints.txt README.md LICENSE alembic.ini ./
COPY services services
COPY brain-ops brain-ops
COPY migrations migrations
RUN /opt/brain/bin/pip install --no-cache-dir -c constraints.txt .

# -- runtime: slim Python, tini for signals, git for the identity resolver's fallback, a non-root user -----
FROM python:3.11-slim-bookworm
# tini reaps children and forwards SIGTERM (the ops loop and uvicorn stop cleanly on it); git answers the
# few identity questions the in-process reader leaves to git (ADR 0015). No curl: the healthcheck is Python.
RUN apt-get update \
    && apt-get install -y --no-install-recommends tini git \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 brain \
    && useradd --system --uid 10001 --gid brain --home-dir /home/brain --create-home --shell /usr/sbin/nologin brain \
    && mkdir -p /vault /var/lib/brain \
    && chown brain:brain /vault /var/lib/brain
COPY --from=build /opt/brain /opt/brain
COPY docker/entrypoint.sh /usr/local/bin/brain-entrypoint
COPY docker/healthcheck.py /usr/local/bin/brain-healthcheck
# Bytecode was compiled at install time; a read-only root file system must not be written at run time.
# The containers listen on every interface (a published port or a Service reaches them); the vault is
# mounted at /vault; BRAIN_HOME (only used by the embedded database, when no DATABASE_URL is set) is
# the working directory's .brain. HF_HUB_OFFLINE: the offline embedder ships its model in the package.
ENV PATH=/opt/brain/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    BRAIN_HOST=0.0.0.0 \
    BRAIN_PORT=8080 \
    BRAIN_VAULT=/vault
WORKDIR /var/lib/brain
USER 10001:10001
EXPOSE 8080
# Liveness of the API (the default command); compose and the chart probe readiness, /ping for mcp, and
# turn the check off for the jobs.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["brain-healthcheck", "/health"]
ENTRYPOINT ["tini", "--", "brain-entrypoint"]
CMD ["brain", "serve"]
