"""The package: one version everywhere it is read, and a wheel that installs and serves on its own (ADR 0058).

The wheel goes into a fresh virtual environment with ``--no-deps``: installing
its dependencies from the index would take minutes, so the new environment
sees this one's packages through a .pth file. Those folders' own .pth files,
the editable install's among them, are not processed, so the kernel imported
there is the wheel's; ``pip check`` proves the wheel's declared dependencies
are met by what it sees.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
import uuid
import zipfile
from importlib import metadata
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

import brain_kernel
from brain_cli.cli import app
from brain_kernel.settings import child_environment
from tests.support.harness import HTTP, REPO_ROOT, admin_exec, db_url, make_settings
from tests.support.servers import free_port, stop


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


def test_brain_init_ships_the_repositorys_env_example_unchanged() -> None:
    """The template brain ships is the one file: the repository's .env.example links to it (compose users copy it)."""
    shipped = REPO_ROOT / "services" / "brain-cli" / "brain_cli" / "env.example"
    root = REPO_ROOT / ".env.example"
    assert root.is_symlink() and root.resolve() == shipped.resolve(), ".env.example must link to services/brain-cli/brain_cli/env.example"
    assert shipped.is_file() and not shipped.is_symlink()  # the wheel and the image's build context hold the file itself
    assert "brain_cli" in tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]


# The import packages the wheel must hold, each with every file of its source folder (package data included).
PACKAGES = {
    "brain_core": "services/brain-core",
    "brain_kernel": "services/brain-kernel",
    "brain_api": "services/brain-api",
    "brain_mcp": "services/brain-mcp",
    "brain_cli": "services/brain-cli",
    "brain_ops": "brain-ops",
    "brain_migrations": "migrations",
}
_NOT_SOURCE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")


def _run(*args: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120, **kwargs)  # type: ignore[call-overload]
    assert result.returncode == 0, f"{args}: {result.stdout}{result.stderr}"
    return result


def _build_wheel(tmp_path: Path) -> Path:
    """The wheel of a copy of the sources (a build in the checkout would leave build/ and *.egg-info there)."""
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO_ROOT / name, source / name)
    for folder in sorted(set(PACKAGES.values())):
        shutil.copytree(REPO_ROOT / folder, source / folder, ignore=_NOT_SOURCE)
    # The build backend pyproject.toml names, called as PEP 517 says (what ``pip wheel --no-build-isolation`` does
    # in a process of its own, after a second of pip's own start-up).
    backend = tomllib.loads((source / "pyproject.toml").read_text())["build-system"]["build-backend"]
    build = "import importlib, sys; importlib.import_module(sys.argv[1]).build_wheel(sys.argv[2])"
    _run(sys.executable, "-c", build, backend, tmp_path / "dist", cwd=source)
    [wheel] = (tmp_path / "dist").glob("brain_kernel-*.whl")
    return wheel


def _fresh_venv(folder: Path) -> Path:
    """A new virtual environment that sees this one's installed packages but none of its .pth files (so not the editable kernel)."""
    _run(sys.executable, "-m", "venv", "--without-pip", folder)
    python = folder / "bin" / "python"
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (purelib / "the-test-venv.pth").write_text("".join(f"{path}\n" for path in sorted(ours)))
    return python


@pytest.mark.slow  # about 9 s: a build, a virtual environment, a server migrating an empty database
def test_the_wheel_installs_into_a_fresh_venv_and_serves(tmp_path: Path, pg_admin_url: str) -> None:
    wheel = _build_wheel(tmp_path)
    version = brain_kernel.__version__
    assert wheel.name == f"brain_kernel-{version}-py3-none-any.whl"
    shipped = set(zipfile.ZipFile(wheel).namelist())
    for package, folder in PACKAGES.items():
        root = tmp_path / "source" / folder
        files = {str(path.relative_to(root)) for path in (root / package).rglob("*") if path.is_file()}
        assert files <= shipped, f"not in the wheel: {sorted(files - shipped)}"
    assert f"brain_kernel-{version}.dist-info/licenses/LICENSE" in shipped

    python = _fresh_venv(tmp_path / "venv")
    pip = (sys.executable, "-m", "pip", "--python", python)
    _run(*pip, "install", "--quiet", "--no-deps", "--no-index", wheel)
    checked = subprocess.run([*map(str, pip), "check"], capture_output=True, text=True, timeout=120)
    assert not [line for line in checked.stdout.splitlines() if line.lower().startswith("brain-kernel")], checked.stdout
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    where = _run(python, "-c", "import brain_api, brain_cli, brain_kernel, brain_migrations; print(brain_kernel.__file__, brain_migrations.__file__)", env=env)
    assert all(Path(path).is_relative_to(tmp_path / "venv") for path in where.stdout.split()), where.stdout
    brain = tmp_path / "venv" / "bin" / "brain"
    assert _run(brain, "--version", env=env).stdout == f"brain {version}\n"

    # brain init in an empty folder, far from any checkout: the wheel carries the template.
    empty = tmp_path / "empty"
    empty.mkdir()
    init_env = {**env, "HOME": str(tmp_path / "home"), "BRAIN_ENV_FILE": ""}
    initialised = json.loads(_run(brain, "init", "--no-vault", cwd=empty, env=init_env).stdout)
    assert initialised["created"] and "BRAIN_TOKENS" in initialised["generated"]
    written = (empty / ".env").read_text()
    assert "=__GENERATE__" not in written and "BRAIN_TOKENS=" in written
    assert sorted(p.name for p in empty.iterdir()) == [".env"]

    # An empty database: the wheel's migrations build the schema from nothing.
    name = f"w_{uuid.uuid4().hex[:16]}"
    admin_exec(pg_admin_url, f'CREATE DATABASE "{name}"')
    try:
        serve_env = {k: v for k, v in child_environment(make_settings(tmp_path, db_url(pg_admin_url, name))).items() if k != "PYTHONPATH"}
        port = free_port()
        log = tmp_path / "serve.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([brain, "serve", "--port", str(port)], cwd=tmp_path, env=serve_env, stdout=out, stderr=out)
        try:
            base = f"http://127.0.0.1:{port}"
            health = _until_healthy(base, proc, log)
            assert health["version"] == version
            deep = HTTP.get(f"{base}/health/deep", timeout=60).json()
            assert deep["checks"]["schema"]["ok"] and deep["checks"]["embeddings"]["ok"], deep  # migrations and the ONNX model
            page = HTTP.get(f"{base}/ui", timeout=30)
            assert page.status_code == 200 and "<html" in page.text  # the templates
            assert HTTP.get(f"{base}/ui/style.css", timeout=30).status_code == 200
        finally:
            assert stop(proc) == 0, log.read_text()
    finally:
        admin_exec(pg_admin_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _until_healthy(base: str, proc: subprocess.Popen[bytes], log: Path) -> dict[str, object]:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # polling a starting process, not waiting on the code under test
        assert proc.poll() is None, log.read_text()
        try:
            answer = HTTP.get(f"{base}/health", timeout=1)
            if answer.status_code == 200:
                return answer.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"brain serve from the wheel did not answer: {log.read_text()}")
