"""The one settings object of the kernel.

Every knob the kernel has is a field here, read from the environment (and the
CLI flags that override it) exactly once, then passed around as a value. No
other module reads ``os.environ``; the architecture test enforces that.
Compatibility aliases from the upstream kernel (VAULT_ROOT, POSTGRES_URL,
KB_ROUTER_TOKENS, KB_ROUTER_TOKEN) are accepted so existing deployments keep
working. The ``brain`` commands also read the working folder's ``.env`` (the
file compose reads and ``brain init`` writes), under the environment
(``Settings.load``, ADR 0058).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

if TYPE_CHECKING:
    from brain_kernel.auth import TokenEntry

DEFAULT_LAYOUT_PATTERNS = ["~/scratchpad/{project}/*", "~/dev/worktrees/{project}/*"]
# What .env.example holds where brain init writes a generated secret (upstream's template convention).
PLACEHOLDER_SECRET = "__GENERATE__"
USER_DATA_FOLDER = "brain"  # under XDG_DATA_HOME (default ~/.local/share)
# The env file the commands read (ADR 0058): the working folder's, as compose reads its project folder's.
DEFAULT_ENV_FILE = ".env"
ENV_FILE_VARIABLE = "BRAIN_ENV_FILE"  # another file instead; empty: none
# OpenAI's embedding models and their dimensions, so upstream's .env (a model, no EMBED_DIM) embeds unchanged.
KNOWN_EMBED_DIMS = {"text-embedding-3-large": 3072, "text-embedding-3-small": 1536, "text-embedding-ada-002": 1536}


def known_embed_dim(model: str | None) -> int | None:
    """The dimension of a known embedding model, matched as upstream does; None for a model not in the table.

    The name after its last ``/``, lowercased, holding a known name (the
    longest one it holds wins), so ``openai/text-embedding-3-small`` and an
    Azure deployment named ``prod-text-embedding-3-large`` are known too.
    """
    name = (model or "").rsplit("/", 1)[-1].strip().lower()
    held = [known for known in KNOWN_EMBED_DIMS if known in name] if name else []
    return KNOWN_EMBED_DIMS[max(held, key=len)] if held else None


def _split_list(value: Any) -> Any:
    """Accept a JSON list, a comma/newline separated string, or a list."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            import json

            return json.loads(text)
        return [part.strip() for part in text.replace("\n", ",").split(",") if part.strip()]
    return value


class Settings(BaseSettings):
    """Kernel configuration; build once with ``Settings()`` and pass it in."""

    # hide_input_in_errors: a refused BRAIN_TOKENS must not print the tokens it holds.
    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True, env_ignore_empty=True, case_sensitive=True, hide_input_in_errors=True)

    vault: Path = Field(Path("vault"), validation_alias=AliasChoices("BRAIN_VAULT", "VAULT_ROOT"))
    database_url: str | None = Field(None, validation_alias=AliasChoices("DATABASE_URL", "POSTGRES_URL"))
    home: Path = Field(Path(".brain"), validation_alias=AliasChoices("BRAIN_HOME"))
    tokens: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        validation_alias=AliasChoices("BRAIN_TOKENS", "KB_ROUTER_TOKENS", "KB_ROUTER_TOKEN"),
    )
    # The token the client commands (brain status, feed, marker, ...) send to a running kernel; unset: the client file's.
    client_token: str | None = Field(None, validation_alias=AliasChoices("BRAIN_TOKEN"))
    host: str = Field("127.0.0.1", validation_alias=AliasChoices("BRAIN_HOST"))
    # A TCP port: uvicorn would take 99999 modulo 65536 and announce the number it was given.
    port: int = Field(8080, ge=1, le=65535, validation_alias=AliasChoices("BRAIN_PORT"))
    workers: int = Field(1, ge=1, le=64, validation_alias=AliasChoices("BRAIN_WORKERS"))
    # The embedded Postgres's shared buffers (no DATABASE_URL): ``auto`` (a quarter of memory, 128 MB to 8 GB) or a size.
    embedded_shared_buffers: str = Field("auto", validation_alias=AliasChoices("BRAIN_EMBEDDED_SHARED_BUFFERS"))

    # Identity resolution (DESIGN section 3).
    user_home: Path = Field(default_factory=Path.home, validation_alias=AliasChoices("BRAIN_USER_HOME", "HOME"))
    # The base of the per-user data folder ``brain mcp`` keeps its vault and database in (ADR 0041).
    data_home: Path | None = Field(None, validation_alias=AliasChoices("XDG_DATA_HOME"))
    # The project folder an agent names to the stdio MCP servers it starts (Claude Code sets it); ``brain mcp``
    # takes a read's trial arm from its repository when the read names none (ADR 0066).
    agent_project_dir: Path | None = Field(None, validation_alias=AliasChoices("CLAUDE_PROJECT_DIR"))
    catalog_path: Path | None = Field(None, validation_alias=AliasChoices("BRAIN_CATALOG"))
    layout_patterns: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(DEFAULT_LAYOUT_PATTERNS),
        validation_alias=AliasChoices("BRAIN_LAYOUT_PATTERNS"),
    )

    # Transcript sources.
    claude_dir: Path | None = Field(None, validation_alias=AliasChoices("BRAIN_CLAUDE_DIR", "EXTRACT_PROJECTS_DIR"))
    codex_dir: Path | None = Field(None, validation_alias=AliasChoices("BRAIN_CODEX_DIR", "CODEX_HOME"))

    # The amygdala alert file ``GET /signal`` reports (vault-relative).
    amygdala_signal_path: str = Field("brain-feed/amygdala-active.md", validation_alias=AliasChoices("BRAIN_AMYGDALA_SIGNAL_PATH", "AMYGDALA_SIGNAL_PATH"))

    # Markers.
    marker_max_chars: int = Field(4096, ge=1, validation_alias=AliasChoices("BRAIN_MARKER_MAX_CHARS"))
    idempotency_ttl_seconds: int = Field(30 * 86400, ge=1, validation_alias=AliasChoices("BRAIN_IDEMPOTENCY_TTL_SECONDS"))

    # Embeddings and LLM (OpenAI-compatible endpoints; unset = offline defaults).
    # The endpoint's dimension: set, else the known model's (``KNOWN_EMBED_DIMS``), else learned from its first answer.
    # The offline model makes its own, whatever this says; the index column follows the embedder (ensure_dimension).
    embed_dim: int | None = Field(None, ge=1, le=16000, validation_alias=AliasChoices("BRAIN_EMBED_DIM", "EMBED_DIM"))
    embed_dim_force_migrate: bool = Field(False, validation_alias=AliasChoices("BRAIN_EMBED_DIM_FORCE_MIGRATE", "EMBED_DIM_FORCE_MIGRATE"))
    # Off where one job runs the migrations (compose's `migrate`, the chart's hook): a process of an older image then
    # never moves a schema a newer one set, nor a rollback's (ADR 0069). The embedded default migrates regardless.
    migrate_on_start: bool = Field(True, validation_alias=AliasChoices("BRAIN_MIGRATE_ON_START"))
    embed_base_url: str | None = Field(None, validation_alias=AliasChoices("BRAIN_EMBED_BASE_URL", "LLM_API_BASE"))
    embed_api_key: str | None = Field(None, validation_alias=AliasChoices("BRAIN_EMBED_API_KEY", "LLM_API_KEY"))
    embed_model: str | None = Field(None, validation_alias=AliasChoices("BRAIN_EMBED_MODEL", "LLM_EMBED_MODEL"))
    # The least time between two passes of a process embedding the markers it wrote (ADR 0067); 0: the tick does.
    embed_follow_seconds: float = Field(1.0, ge=0, le=3600, validation_alias=AliasChoices("BRAIN_EMBED_FOLLOW_SECONDS"))
    llm_base_url: str | None = Field(None, validation_alias=AliasChoices("BRAIN_LLM_BASE_URL", "INFERENCE_URL"))
    llm_api_key: str | None = Field(None, validation_alias=AliasChoices("BRAIN_LLM_API_KEY", "INFERENCE_API_KEY"))
    llm_model: str | None = Field(None, validation_alias=AliasChoices("BRAIN_LLM_MODEL", "BRAIN_BRIEF_MODEL"))

    # Ingest (``POST /ingest``, UPSTREAM.md 1.9): the classifier's model, the folders a local path may be read from,
    # and the limits of every fetch (a fetch past them is an error in the answer, never a partial note).
    classify_model: str = Field("brain-classify", min_length=1, validation_alias=AliasChoices("BRAIN_CLASSIFY_MODEL"))
    classify_timeout_s: float = Field(120.0, gt=0, le=600, validation_alias=AliasChoices("BRAIN_CLASSIFY_TIMEOUT_S"))
    local_read_roots: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["/workspace", "/mnt/ingest"],
        validation_alias=AliasChoices("BRAIN_LOCAL_READ_ROOTS", "LOCAL_READ_ROOTS"),
    )
    ingest_fetch_timeout_s: float = Field(60.0, gt=0, le=600, validation_alias=AliasChoices("BRAIN_INGEST_FETCH_TIMEOUT_S"))
    ingest_fetch_max_bytes: int = Field(5 * 1024 * 1024, ge=1024, validation_alias=AliasChoices("BRAIN_INGEST_FETCH_MAX_BYTES"))
    ingest_clone_timeout_s: float = Field(300.0, gt=0, le=3600, validation_alias=AliasChoices("BRAIN_INGEST_CLONE_TIMEOUT_S"))
    ingest_clone_max_bytes: int = Field(200 * 1024 * 1024, ge=1024, validation_alias=AliasChoices("BRAIN_INGEST_CLONE_MAX_BYTES"))

    # The keeper (upstream's names and defaults, UPSTREAM.md 5.4).
    promote_heat: int = Field(5, ge=0, le=10, validation_alias=AliasChoices("BRAIN_PROMOTE_HEAT"))
    demote_heat: int = Field(3, ge=0, le=10, validation_alias=AliasChoices("BRAIN_DEMOTE_HEAT"))
    graduate_heat: int = Field(1, ge=0, le=10, validation_alias=AliasChoices("BRAIN_GRADUATE_HEAT"))
    graduate_age_days: int = Field(14, ge=0, validation_alias=AliasChoices("BRAIN_GRADUATE_AGE_DAYS"))
    decay_start_days: int = Field(7, ge=0, validation_alias=AliasChoices("BRAIN_DECAY_START_DAYS"))
    decay_interval_days: int = Field(4, ge=1, validation_alias=AliasChoices("BRAIN_DECAY_INTERVAL_DAYS"))
    stale_signal_days: int = Field(3, ge=0, validation_alias=AliasChoices("BRAIN_STALE_SIGNAL_DAYS"))
    stale_inject_days: int = Field(30, ge=0, validation_alias=AliasChoices("BRAIN_STALE_INJECT_DAYS"))
    hot_arc_blurb_chars: int = Field(220, ge=20, le=4000, validation_alias=AliasChoices("BRAIN_HOT_ARC_BLURB_CHARS"))
    # A deterministic tick keeps a project intent a model wrote for this long (then derives one again).
    intent_model_max_age_hours: float = Field(72.0, gt=0, validation_alias=AliasChoices("BRAIN_INTENT_MODEL_MAX_AGE_HOURS"))
    # Signal verifiers (``verify="<cmd>"``): off by default; when on, only the exact commands
    # listed here run, split into argv (no shell), with a timeout, at most once per tick.
    verifier_enabled: bool = Field(False, validation_alias=AliasChoices("BRAIN_VERIFIER_ENABLED"))
    verify_commands: Annotated[list[str], NoDecode] = Field(default_factory=list, validation_alias=AliasChoices("BRAIN_VERIFY_COMMANDS"))
    verify_timeout_s: float = Field(10.0, gt=0, le=300, validation_alias=AliasChoices("BRAIN_VERIFY_TIMEOUT_S"))

    # Injection records and the holdout trial (ADR 0050): off (0 %) unless an operator sets a percentage and a salt.
    trial_control_percent: int = Field(0, ge=0, le=100, validation_alias=AliasChoices("BRAIN_TRIAL_CONTROL_PERCENT"))
    trial_salt: str | None = Field(None, min_length=8, max_length=200, validation_alias=AliasChoices("BRAIN_TRIAL_SALT"))
    injection_retention_days: int = Field(90, ge=0, validation_alias=AliasChoices("BRAIN_INJECTION_RETENTION_DAYS"))

    # The brain-ops loop (``brain ops-loop``; upstream's names, UPSTREAM.md 5.9, 6).
    extract_hour: int = Field(4, ge=0, le=23, validation_alias=AliasChoices("EXTRACT_HOUR"))
    extract_since: str = Field("26h", validation_alias=AliasChoices("EXTRACT_SINCE"))
    extract_min_turns: int = Field(5, ge=0, validation_alias=AliasChoices("EXTRACT_MIN_TURNS"))
    tick_interval_seconds: float = Field(7200.0, gt=0, validation_alias=AliasChoices("TICK_INTERVAL_SECONDS"))
    tick_drain_interval_seconds: float = Field(30.0, gt=0, validation_alias=AliasChoices("TICK_DRAIN_INTERVAL_SECONDS"))
    # A vault shared by ``brain sync`` (ADR 0056, 0057): the git remote the loop syncs with after each tick (unset: no
    # sync), and whether this kernel is the vault's one keeper (makes the tick's arc and inbox edits).
    sync_remote: str | None = Field(None, validation_alias=AliasChoices("BRAIN_SYNC_REMOTE"))
    vault_keeper: bool = Field(True, validation_alias=AliasChoices("BRAIN_VAULT_KEEPER"))

    # The event bus (Redis Streams; upstream's names and defaults, UPSTREAM.md 5.3, 5.7): unset REDIS_URL = no bus.
    # Both the tick's publisher and the amygdala use REDIS_URL with its database replaced by EVENT_BUS_DB (ADR 0018).
    redis_url: str | None = Field(None, validation_alias=AliasChoices("REDIS_URL"))
    event_bus_db: int = Field(11, ge=0, validation_alias=AliasChoices("EVENT_BUS_DB", "AMYGDALA_DB"))
    event_bus_stream: str = Field("events:brain", min_length=1, validation_alias=AliasChoices("EVENT_BUS_STREAM"))
    event_bus_topic: str = Field("agentibrain-system", validation_alias=AliasChoices("EVENT_BUS_TOPIC"))
    amygdala_streams: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: ["events:health", "events:host", "events:deploy", "events:system", "events:brain"],
        validation_alias=AliasChoices("AMYGDALA_STREAMS"),
    )
    amygdala_group: str = Field("amygdala", min_length=1, validation_alias=AliasChoices("AMYGDALA_GROUP"))
    # Unset: ``amygdala-<host name>``, so a one-shot and a continuous amygdala never share a consumer (ADR 0018).
    amygdala_consumer: str | None = Field(None, validation_alias=AliasChoices("AMYGDALA_CONSUMER"))
    amygdala_clear_window: float = Field(900.0, gt=0, validation_alias=AliasChoices("AMYGDALA_CLEAR_WINDOW"))
    amygdala_poll_interval: float = Field(5.0, gt=0, le=300, validation_alias=AliasChoices("AMYGDALA_POLL_INTERVAL"))

    # The server's log lines: uvicorn's text, or one JSON object a line with the request's id (brain_kernel.log_format).
    log_format: Literal["text", "json"] = Field("text", validation_alias=AliasChoices("BRAIN_LOG_FORMAT"))
    # ``GET /metrics`` without a bearer token (it holds counts and timings, no memory).
    metrics_public: bool = Field(False, validation_alias=AliasChoices("BRAIN_METRICS_PUBLIC"))
    # Refuse to start with no token (auth off): the chart sets it, so a Secret of its own that lacks BRAIN_TOKENS stops
    # every pod with this reason instead of serving the memory to anyone who reaches it.
    auth_required: bool = Field(False, validation_alias=AliasChoices("BRAIN_AUTH_REQUIRED"))
    # ``/docs``, ``/redoc`` and ``/openapi.json`` without a bearer token (the schema holds no memory).
    docs_public: bool = Field(True, validation_alias=AliasChoices("BRAIN_DOCS_PUBLIC"))
    # The largest request body the API reads (413 before it is read); /embed takes 2 000 000 characters.
    max_body_bytes: int = Field(8 * 1024 * 1024, ge=1024, validation_alias=AliasChoices("BRAIN_MAX_BODY_BYTES"))

    @field_validator("layout_patterns", "verify_commands", "amygdala_streams", "local_read_roots", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("tokens", mode="before")
    @classmethod
    def _some_token(cls, value: Any) -> Any:
        # "," or " , " or "[]" would otherwise parse to no token at all, which means auth off (ADR 0021).
        parsed = _split_list(value)
        if isinstance(value, str) and value.strip() and not parsed:
            raise ValueError("BRAIN_TOKENS is set but holds no token; unset it to turn auth off")
        return parsed

    @field_validator("tokens")
    @classmethod
    def _no_placeholder_token(cls, value: list[str]) -> list[str]:
        # A .env copied from .env.example by hand would otherwise run with a token anyone can read.
        if any(entry.partition("=")[0].strip() == PLACEHOLDER_SECRET for entry in value):
            raise ValueError(f"{PLACEHOLDER_SECRET} is a placeholder, not a token: run brain init to generate one")
        if any(not entry.strip() for entry in value):
            raise ValueError("BRAIN_TOKENS holds an empty token")
        from brain_kernel.auth import TokenConfigError, parse_entries

        try:
            parse_entries(value)
        except TokenConfigError as exc:  # the message names the problem, never the token
            raise ValueError(f"BRAIN_TOKENS: {exc}") from None
        return value

    @field_validator("embedded_shared_buffers")
    @classmethod
    def _buffers(cls, value: str) -> str:
        # A bare number would be read by Postgres as 8 kB pages: the unit is required.
        if value != "auto" and not re.fullmatch(r"[1-9][0-9]*(kB|MB|GB|TB)", value):
            raise ValueError(f"{value!r} is neither auto nor a size with its unit (512MB, 2GB)")
        return value

    @field_validator("database_url", "redis_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        return value.strip()

    @model_validator(mode="after")
    def _auth_when_required(self) -> Settings:
        if self.auth_required and not self.tokens:
            raise ValueError("BRAIN_AUTH_REQUIRED is on but no token is set (BRAIN_TOKENS, or upstream's KB_ROUTER_TOKEN)")
        return self

    @model_validator(mode="after")
    def _trial_needs_a_salt(self) -> Settings:
        if self.trial_control_percent and not self.trial_salt:
            raise ValueError("BRAIN_TRIAL_CONTROL_PERCENT needs BRAIN_TRIAL_SALT (brain init writes one)")
        return self

    @model_validator(mode="after")
    def _model_dimension(self) -> Settings:
        # Unset EMBED_DIM with a known model: the model's dimension. Kept out of the fields set, so a copy with
        # another model (with_overrides) or a child's environment (to_environ) derives it again instead of pinning it.
        if self.embed_dim is None and self.embed_base_url:
            self.__dict__["embed_dim"] = known_embed_dim(self.embed_model)
        return self

    @cached_property
    def token_entries(self) -> list[TokenEntry]:
        """The parsed ``BRAIN_TOKENS`` entries (token digests and their projects), parsed once."""
        from brain_kernel.auth import parse_entries

        return parse_entries(self.tokens)

    @property
    def metrics_dir(self) -> Path:
        """Where ``brain serve --workers N``'s workers keep their HTTP metrics for a scrape to sum (ADR 0054)."""
        return self.home / "metrics"

    @property
    def resolved_claude_dir(self) -> Path:
        return (self.claude_dir or self.user_home / ".claude" / "projects").expanduser()

    @property
    def resolved_codex_dir(self) -> Path:
        return (self.codex_dir or self.user_home / ".codex").expanduser()

    @property
    def user_data_dir(self) -> Path:
        """The per-user data folder: ``$XDG_DATA_HOME/brain``, else ``~/.local/share/brain`` (a relative XDG_DATA_HOME is ignored, as the XDG spec says)."""
        base = self.data_home if self.data_home is not None and self.data_home.is_absolute() else self.user_home / ".local" / "share"
        return (base / USER_DATA_FOLDER).expanduser()

    def in_user_data_dir(self) -> Settings:
        """A copy whose vault and home, where the environment did not name them, are ``vault`` and ``.brain`` in ``user_data_dir``.

        For ``brain mcp``, which an agent starts in whatever folder it works
        in: the relative defaults would put a vault and a database in the
        user's repository (ADR 0041). Call it before applying CLI flags: it
        reads which fields the environment set.
        """
        chosen = self.model_fields_set
        folder = self.user_data_dir
        return self.with_overrides(vault=None if "vault" in chosen else folder / "vault", home=None if "home" in chosen else folder / ".brain")

    def with_overrides(self, **overrides: Any) -> Settings:
        """Return a copy with the non-None overrides applied (CLI flags)."""
        data = self.model_dump(exclude=None if "embed_dim" in self.model_fields_set else {"embed_dim"})
        data.update({k: v for k, v in overrides.items() if v is not None})
        return type(self).explicit(**data)

    @classmethod
    def load(cls) -> Settings:
        """The environment's settings over those of the env file, when there is one (ADR 0058).

        The file is ``BRAIN_ENV_FILE``, else ``.env`` in the working folder when
        it exists. A variable set in the environment wins over the file's, as in
        compose. ConfigError when ``BRAIN_ENV_FILE`` names a file that is not there.
        """
        name = os.environ.get(ENV_FILE_VARIABLE, DEFAULT_ENV_FILE)
        path = Path(name).expanduser() if name else None
        if path is not None and name != DEFAULT_ENV_FILE and not path.is_file():
            from brain_kernel.errors import ConfigError

            raise ConfigError(f"{ENV_FILE_VARIABLE} names {path}, which is not a file")
        return cls(_env_file=path, _env_file_encoding="utf-8")

    @classmethod
    def explicit(cls, **values: Any) -> Settings:
        """Build settings from the given values only, ignoring the environment (tests, copies)."""
        return _ExplicitSettings(**values)

    def to_environ(self) -> dict[str, str]:
        """The environment that rebuilds these settings in a child process (uvicorn workers).

        Every field, under its first (canonical) name; lists as JSON; unset
        optional fields are left out. ``BRAIN_ENV_FILE`` is empty: the child
        reads no env file, as these settings already hold the parent's.
        """
        import json

        env: dict[str, str] = {ENV_FILE_VARIABLE: ""}
        for name, info in type(self).model_fields.items():
            value = getattr(self, name)
            if value is None or (name == "tokens" and not value) or (name == "embed_dim" and name not in self.model_fields_set):
                continue  # no tokens is "unset" (auth off); "[]" would be refused as a value; a derived dimension is derived again
            alias = info.validation_alias
            variable = alias.choices[0] if isinstance(alias, AliasChoices) else str(alias)
            env[str(variable)] = json.dumps(value) if isinstance(value, list) else str(value)
        return env


class _ExplicitSettings(Settings):
    """Settings that read only their init values (no environment, no dotenv)."""

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings,)


def environ_snapshot() -> dict[str, str]:
    """A copy of the process environment, for the few adapters that must pass it to children."""
    return dict(os.environ)


def environ_subset(names: Iterable[str]) -> dict[str, str]:
    """The named variables of the process environment that are set (cheaper than a snapshot, per request)."""
    return {name: os.environ[name] for name in names if name in os.environ}


# Every environment variable the settings read starts with one of these.
KERNEL_VARIABLES = (
    "BRAIN_",
    "KB_ROUTER",
    "DATABASE_URL",
    "POSTGRES_URL",
    "VAULT_ROOT",
    "CODEX_HOME",
    "AMYGDALA_",
    "REDIS_URL",
    "EVENT_BUS_",
    "LLM_API_",
    "LLM_EMBED_MODEL",
    "EMBED_DIM",
    "INFERENCE_",
    "EXTRACT_",
    "TICK_",
)


def child_environment(settings: Settings) -> dict[str, str]:
    """This process's environment minus every kernel variable, plus ``settings``: for a child ``brain``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES)}
    env.update(settings.to_environ())
    return env


def export_to_environ(settings: Settings) -> None:
    """Publish settings to this process's environment so worker processes rebuild them.

    With several workers, also prometheus_client's multiprocess folder: every worker writes its HTTP
    counters there and a scrape sums them (ADR 0054).
    """
    os.environ.update(settings.to_environ())
    if settings.workers > 1:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(settings.metrics_dir)
