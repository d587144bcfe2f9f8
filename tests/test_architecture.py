"""Architecture rules: a pure core, one reader of the environment."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

CORE = REPO_ROOT / "services" / "brain-core"
FORBIDDEN_IN_CORE = {"sqlalchemy", "fastapi", "starlette", "httpx", "requests", "subprocess", "git", "psycopg", "alembic", "uvicorn", "socket", "urllib.request", "brain_kernel", "brain_api", "brain_ops"}
CODE_ROOTS = [REPO_ROOT / "services", REPO_ROOT / "brain-ops", REPO_ROOT / "migrations"]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def _py_files(*roots: Path) -> list[Path]:
    return [p for root in roots for p in sorted(root.rglob("*.py"))]


def test_core_imports_no_io_library() -> None:
    offenders = []
    for path in _py_files(CORE):
        for name in _imports(path):
            if any(name == bad or name.startswith(bad + ".") for bad in FORBIDDEN_IN_CORE):
                offenders.append(f"{path.relative_to(REPO_ROOT)} imports {name}")
    assert not offenders, offenders


def test_core_does_no_file_io() -> None:
    offenders = []
    for path in _py_files(CORE):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in {"open", "read_text", "write_text", "read_bytes", "write_bytes", "iterdir", "mkdir", "unlink", "system", "popen"}:
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} calls {name}")
    assert not offenders, offenders


def test_only_the_settings_module_reads_the_environment() -> None:
    allowed = REPO_ROOT / "services" / "brain-kernel" / "settings.py"
    offenders = []
    for path in _py_files(*CODE_ROOTS):
        if path == allowed:
            continue
        source = path.read_text()
        if "os.environ" in source or "os.getenv" in source or "getenv(" in source:
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders, offenders


def test_no_sys_path_tricks() -> None:
    offenders = [str(p.relative_to(REPO_ROOT)) for p in _py_files(*CODE_ROOTS, REPO_ROOT / "tests", REPO_ROOT / "bench") if "sys.path.insert" in p.read_text() or "sys.path.append" in p.read_text()]
    offenders = [o for o in offenders if not o.endswith("test_architecture.py")]
    assert not offenders, offenders
