"""The package: one version everywhere it is read, and a wheel that installs and serves on its own (ADR 0058)."""

from __future__ import annotations

import tomllib
from importlib import metadata

import yaml
from typer.testing import CliRunner

import brain_kernel
from brain_cli.cli import app
from tests.support.harness import REPO_ROOT


def test_every_reader_of_the_version_says_brain_kernel_version(client) -> None:  # type: ignore[no-untyped-def]
    version = brain_kernel.__version__
    assert CliRunner().invoke(app, ["--version"]).stdout == f"brain {version}\n"
    assert client.get("/health").json()["version"] == version
    assert client.get("/openapi.json").json()["info"]["version"] == version
    [build_info] = [line for line in client.get("/metrics").text.splitlines() if line.startswith("brain_build_info{")]
    assert f'version="{version}"' in build_info
    assert metadata.version("brain-kernel") == version, "the installed metadata is stale: reinstall (make test does)"
    chart = yaml.safe_load((REPO_ROOT / "charts" / "brain" / "Chart.yaml").read_text())
    assert chart["appVersion"] == version
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    assert "version" not in project and project["dynamic"] == ["version"]
