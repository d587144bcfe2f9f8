"""Architecture rules (ADR 0011): folders that are their packages, layers imported downward only,
no import cycles, a pure core, one reader of the environment.

Layers, lowest first: ``brain_core`` (pure) <- ``brain_kernel`` (adapters,
repositories, services) <- ``brain_migrations`` (the schema and its runner)
<- ``brain_api`` and ``brain_ops`` (siblings: neither imports the other)
<- ``brain_cli`` (the entry point). Every import counts: top-level, inside a
function, under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.harness import REPO_ROOT

PACKAGE_DIRS = {
    "brain_core": REPO_ROOT / "services" / "brain-core" / "brain_core",
    "brain_kernel": REPO_ROOT / "services" / "brain-kernel" / "brain_kernel",
    "brain_migrations": REPO_ROOT / "migrations" / "brain_migrations",
    "brain_api": REPO_ROOT / "services" / "brain-api" / "brain_api",
    "brain_ops": REPO_ROOT / "brain-ops" / "brain_ops",
    "brain_mcp": REPO_ROOT / "services" / "brain-mcp" / "brain_mcp",
    "brain_cli": REPO_ROOT / "services" / "brain-cli" / "brain_cli",
}
LAYER = {"brain_core": 0, "brain_kernel": 1, "brain_migrations": 2, "brain_api": 3, "brain_ops": 3, "brain_mcp": 3, "brain_cli": 4}
FORBIDDEN_IN_CORE = {
    "sqlalchemy",
    "fastapi",
    "starlette",
    "httpx",
    "requests",
    "subprocess",
    "git",
    "psycopg",
    "alembic",
    "uvicorn",
    "socket",
    "urllib.request",
    "os",
    "shutil",
    "tempfile",
    "pathlib",
    "io",
}


@dataclass(frozen=True)
class Import:
    """One import statement: the importing module, the imported module, where."""

    source: str
    target: str
    path: Path
    line: int


def _module_name(package: str, path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIRS[package].parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted(folder.rglob("*.py")):
            found[_module_name(package, path)] = path
    return found


MODULES = _modules()


def _resolve(source: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> Iterator[str]:
    """The project modules one statement imports (``from pkg import mod`` names the module ``pkg.mod``)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name
        return
    base = node.module or ""
    if node.level:
        anchor = source.split(".") if is_package else source.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        yield candidate if candidate in MODULES else base


def imports_of(path: Path, source: str) -> list[Import]:
    """Every import in a file (lazy ones inside functions included), as project module names or externals."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for target in _resolve(source, node, path.name == "__init__.py"):
                out.append(Import(source, target, path, node.lineno))
    return out


def all_imports() -> list[Import]:
    return [imp for name, path in MODULES.items() for imp in imports_of(path, name)]


def _top(name: str) -> str:
    return name.split(".", 1)[0]


def layering_violations(imports: list[Import]) -> list[str]:
    """Imports from a package into one on a higher layer, or into a sibling of the same layer."""
    bad = []
    for imp in imports:
        here, there = _top(imp.source), _top(imp.target)
        if there not in LAYER or there == here:
            continue
        if LAYER[there] >= LAYER[here]:
            where = imp.path.relative_to(REPO_ROOT) if imp.path.is_relative_to(REPO_ROOT) else imp.path
            bad.append(f"{where}:{imp.line} {here} (layer {LAYER[here]}) imports {imp.target} (layer {LAYER[there]})")
    return bad


def import_cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan), over project modules only."""
    graph: dict[str, set[str]] = {name: set() for name in MODULES}
    for imp in imports:
        target = imp.target
        while target and target not in MODULES:  # ``import a.b.c`` of a symbol: the nearest module
            target = target.rpartition(".")[0]
        if target and target != imp.source:
            graph[imp.source].add(target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return groups


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_name_uses(path: Path, source: str) -> list[str]:
    """Where a module takes another project module's private name: ``from m import _x``, or ``m._x`` on a module it
    imported (``import a.b``, ``import a.b as m``, ``from a import b``); dunders are public."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    bound: dict[str, str] = {}  # local name -> the project module it names
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _top(alias.name) in LAYER:
                    local = alias.asname or alias.name.split(".", 1)[0]
                    bound[local] = alias.name if alias.asname else local
        elif isinstance(node, ast.ImportFrom):
            for alias, target in zip(node.names, _resolve(source, node, is_package), strict=True):
                if _top(target) not in LAYER:
                    continue
                owner = target.removesuffix(f".{alias.name}")
                if _is_private(alias.name) and owner != source:
                    out.append(f"{where}:{node.lineno} {source} imports {owner}.{alias.name}")
                elif target in MODULES and target != owner:
                    bound[alias.asname or alias.name] = target
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
            continue
        parts, value = [], node.value
        while isinstance(value, ast.Attribute):
            parts.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in bound:
            owner = ".".join([bound[value.id], *reversed(parts)])
            if owner in MODULES and owner != source:
                out.append(f"{where}:{node.lineno} {source} uses {owner}.{node.attr}")
    return out


def test_every_package_lives_in_a_folder_of_its_own_name() -> None:
    config = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "package-dir" not in config["tool"]["setuptools"], "no package-dir remapping: a folder is its package"
    where = {REPO_ROOT / w for w in config["tool"]["setuptools"]["packages"]["find"]["where"]}
    for package, folder in PACKAGE_DIRS.items():
        assert folder.name == package and (folder / "__init__.py").is_file(), package
        assert folder.parent in where, f"{folder.parent} is not a package root in pyproject.toml"


def test_layers_import_downward_only() -> None:
    violations = layering_violations(all_imports())
    assert not violations, "\n".join(violations)


def test_no_import_cycles() -> None:
    cycles = import_cycles(all_imports())
    assert not cycles, cycles


def test_the_layering_check_catches_an_upward_import(tmp_path: Path) -> None:
    """The rule itself can fail: a kernel module importing brain_api (even lazily) is reported."""
    fake = tmp_path / "upward.py"
    fake.write_text("def f():\n    from brain_api.app import create_app\n    return create_app\n")
    violations = layering_violations(imports_of(fake, "brain_kernel.upward"))
    assert len(violations) == 1 and "brain_kernel (layer 1) imports brain_api.app" in violations[0]
    sibling = tmp_path / "sibling.py"
    sibling.write_text("import brain_ops.keeper.tick\n")
    assert layering_violations(imports_of(sibling, "brain_api.sibling"))


def test_no_module_uses_another_modules_private_name() -> None:
    """A name with a leading underscore belongs to its module: a helper two modules share is public in one home."""
    violations = [v for name, path in MODULES.items() for v in private_name_uses(path, name)]
    assert not violations, "\n".join(violations)


def test_the_private_name_check_catches_a_borrowed_helper(tmp_path: Path) -> None:
    """The rule itself can fail: each way of reaching into another module is reported, public and dunder names are not."""
    fake = tmp_path / "borrower.py"
    fake.write_text(
        "import brain_kernel.db.engine\n"
        "import brain_kernel.db.models as models\n"
        "from brain_kernel.feed import feed_repo\n"
        "from brain_kernel.feed.feed_repo import _helper, member\n"
        "from . import _sibling\n"
        "def f():\n"
        "    return feed_repo._columns, models._now(), brain_kernel.db.engine._SECONDARY_INDEXES, feed_repo.__name__, member\n"
    )
    found = private_name_uses(fake, "brain_kernel.search.borrower")
    assert sorted(v.split(" ", 1)[1] for v in found) == [
        "brain_kernel.search.borrower imports brain_kernel.feed.feed_repo._helper",
        "brain_kernel.search.borrower imports brain_kernel.search._sibling",
        "brain_kernel.search.borrower uses brain_kernel.db.engine._SECONDARY_INDEXES",
        "brain_kernel.search.borrower uses brain_kernel.db.models._now",
        "brain_kernel.search.borrower uses brain_kernel.feed.feed_repo._columns",
    ]
    own = tmp_path / "own.py"
    own.write_text("import httpx\nclass C:\n    _x = 1\n    def f(self):\n        return self._x, httpx._client, C._x\n")
    assert private_name_uses(own, "brain_kernel.own") == []


def test_the_cycle_check_catches_a_loop() -> None:
    loop = [Import("brain_cli.cli", "brain_cli.commands.tick", Path("a"), 1), Import("brain_cli.commands.tick", "brain_cli.cli", Path("b"), 1)]
    assert import_cycles(loop) == [["brain_cli.cli", "brain_cli.commands.tick"]]


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _top(m) == "brain_core"))
def test_core_imports_no_io_library(module: str) -> None:
    offenders = [
        f"{imp.target} (line {imp.line})"
        for imp in imports_of(MODULES[module], module)
        if any(imp.target == bad or imp.target.startswith(bad + ".") for bad in FORBIDDEN_IN_CORE)
        or (_top(imp.target) in LAYER and _top(imp.target) != "brain_core")
    ]
    assert not offenders, offenders


def test_core_does_no_file_io() -> None:
    offenders = []
    for name, path in MODULES.items():
        if _top(name) != "brain_core":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                func = node.func
                called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if called in {"open", "read_text", "write_text", "read_bytes", "write_bytes", "iterdir", "mkdir", "unlink", "system", "popen"}:
                    offenders.append(f"{path.relative_to(REPO_ROOT)}:{node.lineno} calls {called}")
    assert not offenders, offenders


def test_only_the_settings_module_reads_the_environment() -> None:
    # The hook process cannot afford pydantic: its client module is its settings (ADR 0042).
    allowed = {MODULES["brain_kernel.settings"], MODULES["brain_cli.hook.kernel"]}
    offenders = []
    for path in MODULES.values():
        if path in allowed:
            continue
        source = path.read_text()
        if "os.environ" in source or "os.getenv" in source or "getenv(" in source:
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert not offenders, offenders


def test_no_sys_path_tricks() -> None:
    roots = [*PACKAGE_DIRS.values(), REPO_ROOT / "tests", REPO_ROOT / "bench"]
    offenders = [
        str(p.relative_to(REPO_ROOT))
        for root in roots
        for p in sorted(root.rglob("*.py"))
        if p.name != "test_architecture.py" and ("sys.path.insert" in p.read_text() or "sys.path.append" in p.read_text())
    ]
    assert not offenders, offenders


# The derived stores' writers (ADR 0038): only the index package (and the search index's own module) calls them;
# every other writer of the vault goes through ``brain_kernel.index.changes.sync_changes``.
DERIVED_STORE_WRITES = {
    "brain_kernel.index.entries": {"upsert_entries", "write_file_records", "delete_entries_at", "drop_paths_not_in"},
    "brain_kernel.index.filestats": {"save", "forget"},
    "brain_kernel.search.search_docs": {"upsert_documents", "delete_documents", "rebuild_documents"},
}


def _may_write_derived_stores(source: str) -> bool:
    return source.startswith("brain_kernel.index.") or source == "brain_kernel.search.search_docs"


def derived_store_writes(path: Path, source: str) -> list[str]:
    """Where a module outside the index package reaches a derived store's writer: imported by name, or called on its module."""
    if _may_write_derived_stores(source):
        return []
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    where = path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path
    bound: dict[str, str] = {}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in DERIVED_STORE_WRITES and alias.asname:
                    bound[alias.asname] = alias.name
        elif isinstance(node, ast.ImportFrom):
            for alias, target in zip(node.names, _resolve(source, node, is_package), strict=True):
                owner = target.removesuffix(f".{alias.name}")
                if alias.name in DERIVED_STORE_WRITES.get(owner, ()):
                    out.append(f"{where}:{node.lineno} {source} imports {owner}.{alias.name}")
                elif target in DERIVED_STORE_WRITES:
                    bound[alias.asname or alias.name] = target
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in bound:
            module = bound[node.value.id]
            if node.attr in DERIVED_STORE_WRITES[module]:
                out.append(f"{where}:{node.lineno} {source} calls {module}.{node.attr}")
    return out


def test_only_the_one_path_writes_the_derived_stores() -> None:
    """Index entries, file stats and search documents change only through ``index.changes.sync_changes`` (and a rebuild)."""
    violations = [v for name, path in MODULES.items() for v in derived_store_writes(path, name)]
    assert not violations, "\n".join(violations)


def test_the_derived_store_check_catches_a_writer_by_hand(tmp_path: Path) -> None:
    """The rule itself can fail: a route upserting entries or saving file stats itself is reported, the one path is not."""
    fake = tmp_path / "writer.py"
    fake.write_text(
        "from brain_kernel.index.entries import upsert_entries\n"
        "from brain_kernel.index import filestats\n"
        "from brain_kernel.search import search_docs as docs\n"
        "from brain_kernel.index.changes import sync_changes\n"
        "def write(db, vault, rows):\n"
        "    upsert_entries(db, rows)\n"
        "    filestats.save(db, [])\n"
        "    docs.upsert_documents(db, [])\n"
        "    filestats.stat_one(vault, 'a.md')\n"
        "    sync_changes(db, vault, ['a.md'])\n"
    )
    found = derived_store_writes(fake, "brain_api.routes.writer")
    assert len(found) == 3, found
    assert any("imports brain_kernel.index.entries.upsert_entries" in v for v in found)
    assert any("calls brain_kernel.index.filestats.save" in v for v in found)
    assert any("calls brain_kernel.search.search_docs.upsert_documents" in v for v in found)


def test_the_tests_never_import_the_benchmarks() -> None:
    """The harness is ``tests.support``, which the benchmarks import; a test or the harness importing ``bench`` is reported."""
    found = []
    for path in sorted((REPO_ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{path.relative_to(REPO_ROOT)}:{node.lineno} imports {n}" for n in names if n == "bench" or n.startswith("bench.")]
    assert not found, "\n".join(found)
