"""Upstream's deployment (UPSTREAM.md section 6) as the kernel's compose.yml, image and chart keep it.

The files are read by the tools that read them in production, as in
test_deployment.py (the fixtures are in conftest.py): Docker Compose v2 resolves
compose.yml with the .env ``brain init`` wrote, helm renders the chart, and the
image's health check runs as a process against a real HTTP server. Each test
pins what an operator moving from upstream's stack relies on: service names,
ports, volumes, health checks, schedules and the names of upstream's Services.
"""

from __future__ import annotations

import http.server
import json
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from typer.testing import CliRunner

from brain_cli.cli import app
from brain_cli.commands.init import parse_env
from tests.deploy.conftest import CHART, MINIMAL, REPO, _by_kind, _pod_specs, _render, _run
from tests.support.servers import StubHTTPServer

UPSTREAM_TOKEN = "upstream-router-token"


def _services(compose: Path, folder: Path) -> dict[str, Any]:
    done = _run(compose, "--profile", "amygdala", "config", "--format", "json", cwd=folder)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["services"]


@pytest.fixture
def upstream_stack(tmp_path: Path) -> Path:
    """compose.yml beside an upstream .env that ``brain init`` took over (UPSTREAM.md 6: local/.env.template's names)."""
    shutil.copy(REPO / "compose.yml", tmp_path / "compose.yml")
    shutil.copy(REPO / ".env.example", tmp_path / ".env.example")
    (tmp_path / ".env").write_text(
        f"KB_ROUTER_TOKEN={UPSTREAM_TOKEN}\nEMBEDDINGS_API_KEYS=old-key\nEMBEDDINGS_API_KEY=old-key\n"
        "PORT_BRAIN_API=9103\nPORT_MCP=9104\nPORT_REDIS=16379\nVAULT_ROOT_HOST=/srv/agentibrain/vault\n"
        "INFERENCE_URL=http://ollama:11434/v1\nINFERENCE_API_KEY=sk-local\nBRAIN_BRIEF_MODEL=brain-brief\n"
    )
    result = CliRunner().invoke(app, ["init", "--env-file", str(tmp_path / ".env"), "--template", str(tmp_path / ".env.example"), "--no-vault"])
    assert result.exit_code == 0, result.output
    return tmp_path


def test_compose_keeps_upstreams_postgres_and_redis(compose: Path, stack: Path) -> None:
    services = _services(compose, stack)
    postgres = services["postgres"]
    assert postgres["image"] == "pgvector/pgvector:pg16"
    assert (postgres["environment"]["POSTGRES_USER"], postgres["environment"]["POSTGRES_DB"]) == ("brain", "brain")
    assert [(v["source"], v["target"]) for v in postgres["volumes"]] == [("pg-data", "/var/lib/postgresql/data")]
    check = postgres["healthcheck"]
    assert "pg_isready" in check["test"][1] and (check["interval"], check["retries"]) == ("10s", 10)
    redis = services["redis"]
    assert redis["image"] == "redis:7-alpine" and redis["command"] == ["redis-server", "--appendonly", "yes"]
    assert [(v["source"], v["target"]) for v in redis["volumes"]] == [("redis-data", "/data")]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert set(services) == {"postgres", "migrate", "brain-api", "brain-ops", "mcp", "redis", "amygdala"}  # no embeddings service


def test_an_upstream_env_keeps_its_ports_vault_token_and_inference_endpoint(compose: Path, upstream_stack: Path) -> None:
    values = parse_env((upstream_stack / ".env").read_text())
    assert values["BRAIN_TOKENS"] == UPSTREAM_TOKEN and values["PORT_BRAIN_API"] == "9103"
    services = _services(compose, upstream_stack)
    for name, port in (("brain-api", "9103"), ("mcp", "9104"), ("redis", "16379")):
        (binding,) = services[name]["ports"]
        assert (binding["published"], binding["target"]) == (port, 8080 if name != "redis" else 6379), name
    for name in ("brain-api", "brain-ops", "mcp", "amygdala"):
        service = services[name]
        vault = next(v for v in service["volumes"] if v["target"] == "/vault")
        assert vault["source"] == "/srv/agentibrain/vault", name
        environment = service["environment"]
        assert environment["BRAIN_TOKENS"] == UPSTREAM_TOKEN and environment["BRAIN_VAULT"] == "/vault", name
        # Upstream's names reach every container, the drain's included (its Ollama overlay skipped tick-drain).
        assert (environment["INFERENCE_URL"], environment["BRAIN_BRIEF_MODEL"]) == ("http://ollama:11434/v1", "brain-brief"), name


def test_the_amygdala_service_is_upstreams_and_the_ticks_publish_to_the_bus_when_asked(compose: Path, stack: Path) -> None:
    amygdala = _services(compose, stack)["amygdala"]
    assert amygdala["command"] == ["brain", "amygdala", "--continuous"]
    assert amygdala["environment"]["AMYGDALA_CONSUMER"] == "amygdala-local"
    assert amygdala["environment"]["REDIS_URL"] == "redis://redis:6379/11"
    assert amygdala["environment"]["BRAIN_VAULT"] == "/vault" and amygdala["depends_on"]["redis"]["condition"] == "service_healthy"
    env = stack / ".env"
    env.write_text(env.read_text() + "REDIS_URL=redis://redis:6379/11\n")
    assert _services(compose, stack)["brain-ops"]["environment"]["REDIS_URL"] == "redis://redis:6379/11"


class _Answers(http.server.BaseHTTPRequestHandler):
    statuses: ClassVar[dict[str, int]] = {"/health": 200, "/ping": 200, "/health/ready": 503}

    def do_GET(self) -> None:
        self.send_response(self.statuses.get(self.path, 404))
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def local_server() -> Iterator[int]:
    server = StubHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


def _healthcheck(path: str, port: int) -> subprocess.CompletedProcess[str]:
    script = REPO / "docker" / "healthcheck.py"
    return subprocess.run([sys.executable, str(script), path, str(port)], capture_output=True, text=True, timeout=30, check=False)


def test_the_image_health_check_is_a_get_of_the_path_on_the_local_port(local_server: int) -> None:
    """Upstream's images ran curl -sf /health (the API) and /ping (the MCP server); the kernel's image has no curl."""
    assert _healthcheck("/health", local_server).returncode == 0
    assert _healthcheck("/ping", local_server).returncode == 0
    refused = _healthcheck("/health/ready", local_server)
    assert refused.returncode == 1 and "unhealthy" in refused.stderr
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    assert _healthcheck("/health", closed).returncode == 1
    dockerfile = (REPO / "Dockerfile").read_text()
    assert 'HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 CMD ["brain-healthcheck", "/health"]' in dockerfile
    installs = [line.strip() for line in dockerfile.splitlines() if "apt-get install" in line]
    assert installs == ["&& apt-get install -y --no-install-recommends tini git \\"]  # slim, with tini and git; no curl
    assert "EXPOSE 8080" in dockerfile and "BRAIN_HOST=0.0.0.0" in dockerfile and "BRAIN_PORT=8080" in dockerfile


def test_the_chart_serves_on_8080_and_answers_to_upstreams_service_names(helm: Path, rendered: dict[str, list[dict[str, Any]]]) -> None:
    services = _by_kind(rendered["default"], "Service")
    assert {name: s["spec"]["ports"][0]["port"] for name, s in services.items()} == {"brain-api": 8080, "brain-mcp": 8080}
    full = _by_kind(rendered["all-features"], "Service")
    for alias, main in (("agentibrain-brain-api", "brain-api"), ("agentibrain-embeddings", "brain-api"), ("agentibrain-mcp", "brain-mcp")):
        spec = full[alias]["spec"]
        assert spec["selector"] == full[main]["spec"]["selector"], alias
        assert (spec["type"], spec["ports"]) == ("ClusterIP", [{"name": "http", "port": 8080, "targetPort": "http"}]), alias
    # The ServiceMonitor scrapes the API through its main Service only.
    monitor = _by_kind(rendered["all-features"], "ServiceMonitor")["brain-api"]["spec"]["selector"]["matchLabels"]
    matched = [name for name, s in full.items() if monitor.items() <= s["metadata"]["labels"].items()]
    assert matched == ["brain-api"]
    # Installed as release "agentibrain", the MCP Service has upstream's name already; the API needs its alias.
    docs = _render(helm, CHART, "-f", str(MINIMAL), "--set", "api.service.aliases={agentibrain-brain-api,agentibrain-embeddings}")
    assert {"brain-api", "brain-mcp", "agentibrain-brain-api", "agentibrain-embeddings"} == set(_by_kind(docs, "Service"))
    done = _run(helm, "template", "agentibrain", CHART, "-f", MINIMAL)
    assert done.returncode == 0 and "name: agentibrain-mcp\n" in done.stdout
    bad = _run(helm, "template", "brain", CHART, "-f", MINIMAL, "--set", "mcp.service.aliases={Agentibrain_MCP}")
    assert bad.returncode != 0 and "aliases" in bad.stderr


def test_the_chart_keeps_upstreams_schedules_and_sends_the_llm_endpoint_to_every_job(rendered: dict[str, list[dict[str, Any]]]) -> None:
    cronjobs = _by_kind(rendered["default"], "CronJob")
    expected = {"brain-tick": ("7 */2 * * *", 1200), "brain-tick-drain": ("*/1 * * * *", 300), "brain-extract": ("0 4 * * *", 3600)}
    for name, (schedule, deadline) in expected.items():
        spec = cronjobs[name]["spec"]
        assert (spec["schedule"], spec["timeZone"], spec["concurrencyPolicy"]) == (schedule, "Etc/UTC", "Forbid"), name
        job = spec["jobTemplate"]["spec"]
        assert (job["activeDeadlineSeconds"], job["backoffLimit"], job["template"]["spec"]["restartPolicy"]) == (deadline, 1, "Never"), name
    extract = cronjobs["brain-extract"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"][0]
    assert 'brain extract --since "26h" --min-turns 5 | brain cluster' in extract
    # The API's vault is /vault; no LLM endpoint unless configured (ticks are then deterministic).
    for name, pod in _pod_specs(rendered["default"]):
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        assert env["BRAIN_VAULT"] == "/vault" and "BRAIN_LLM_BASE_URL" not in env, name
    for name, pod in _pod_specs(rendered["all-features"]):
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        if name != "brain-migrate":
            assert env["BRAIN_LLM_BASE_URL"] == "http://litellm.ai.svc:4000/v1", name  # the drain too
    amygdala = _by_kind(rendered["all-features"], "Deployment")["brain-amygdala"]["spec"]
    container = amygdala["template"]["spec"]["containers"][0]
    assert amygdala["replicas"] == 1 and container["args"] == ["brain", "amygdala", "--continuous"]
    assert container["envFrom"] == [{"secretRef": {"name": "brain-secrets"}}]


def test_brain_init_reads_an_env_linked_to_agentibrain_and_writes_its_own_file(tmp_path: Path) -> None:
    """Upstream's bootstrap wrote ~/.agentibrain/.env and linked ./.env to it; brain init keeps its values in ./.env."""
    linked = tmp_path / "home" / ".agentibrain" / ".env"
    linked.parent.mkdir(parents=True)
    linked.write_text(f"KB_ROUTER_TOKEN={UPSTREAM_TOKEN}\nPOSTGRES_PASSWORD=kept-password\n")
    before = linked.read_text()
    env = tmp_path / ".env"
    env.symlink_to(linked)
    result = CliRunner().invoke(app, ["init", "--env-file", str(env), "--template", str(REPO / ".env.example"), "--no-vault"])
    assert result.exit_code == 0, result.output
    assert not env.is_symlink() and linked.read_text() == before  # the linked file is left as it was
    values = parse_env(env.read_text())
    assert (values["BRAIN_TOKENS"], values["POSTGRES_PASSWORD"]) == (UPSTREAM_TOKEN, "kept-password")
    assert json.loads(result.stdout)["generated"] == ["BRAIN_TRIAL_SALT"]


def test_the_settings_read_the_names_upstreams_compose_and_charts_set(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from brain_kernel.settings import Settings

    monkeypatch.chdir(tmp_path)
    for field in Settings.model_fields.values():
        for name in field.validation_alias.choices:  # type: ignore[union-attr]
            monkeypatch.delenv(str(name), raising=False)
    upstream = {
        "VAULT_ROOT": "/vault",
        "KB_ROUTER_TOKEN": UPSTREAM_TOKEN,
        "INFERENCE_URL": "http://ollama:11434/v1",
        "INFERENCE_API_KEY": "sk-local",
        "BRAIN_CLASSIFY_MODEL": "brain-classify",
        "BRAIN_BRIEF_MODEL": "brain-brief",
        "TICK_INTERVAL_SECONDS": "7200",
        "TICK_DRAIN_INTERVAL_SECONDS": "30",
        "EXTRACT_HOUR": "04",
        "EXTRACT_SINCE": "26h",
        "EXTRACT_MIN_TURNS": "5",
        "EVENT_BUS_STREAM": "events:brain",
        "EVENT_BUS_TOPIC": "agentibrain-system",
        "AMYGDALA_DB": "11",
        "BRAIN_STALE_SIGNAL_DAYS": "3",
    }
    for name, value in upstream.items():
        monkeypatch.setenv(name, value)
    s = Settings()
    assert (s.vault, s.tokens) == (Path("/vault"), [UPSTREAM_TOKEN])
    assert (s.llm_base_url, s.llm_api_key, s.llm_model, s.classify_model) == ("http://ollama:11434/v1", "sk-local", "brain-brief", "brain-classify")
    assert (s.tick_interval_seconds, s.tick_drain_interval_seconds) == (7200, 30)
    assert (s.extract_hour, s.extract_since, s.extract_min_turns) == (4, "26h", 5)
    assert (s.event_bus_stream, s.event_bus_topic, s.event_bus_db, s.stale_signal_days) == ("events:brain", "agentibrain-system", 11, 3)


def test_the_vault_can_be_upstreams_nfs_share_mounted_as_it_is(helm: Path, kubeval: Path, tmp_path: Path) -> None:
    """Upstream's charts mounted the vault from NFS (nfsVault, extraVolumes): vault.source does the same, with no PVC."""
    nfs = ["--set", "vault.source.nfs.server=nfs.example.internal", "--set", "vault.source.nfs.path=/export/vault"]
    docs = _render(helm, CHART, "-f", str(MINIMAL), *nfs, "--set", "vault.accessModes={ReadWriteMany}", "--set", "api.replicas=2")
    assert not _by_kind(docs, "PersistentVolumeClaim")
    mounted = {name: next(v for v in pod["volumes"] if v["name"] == "vault") for name, pod in _pod_specs(docs) if name != "brain-migrate"}
    assert set(mounted) >= {"brain-api", "brain-mcp", "brain-tick", "brain-tick-drain", "brain-extract", "brain-embed"}
    assert all(v == {"name": "vault", "nfs": {"server": "nfs.example.internal", "path": "/export/vault"}} for v in mounted.values())
    path = tmp_path / "nfs.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    done = _run(kubeval, "--strict", "--quiet", path)
    assert done.returncode == 0, done.stdout + done.stderr
    both = _run(helm, "template", "brain", CHART, "-f", MINIMAL, *nfs, "--set", "vault.existingClaim=shared-vault")
    assert both.returncode != 0 and "vault.existingClaim and vault.source both name the vault" in both.stderr
