"""Benchmark: resolve 1,000 working folders that share 50 real git repositories.

Builds 50 repositories in a temporary folder (each with an origin remote, one
linked worktree and nested subfolders), spreads 1,000 distinct working folders
over them (roots, subfolders one to three levels down, worktrees and their
subfolders), then resolves 2,000 sessions in shuffled order (every folder
twice) with one resolver, starting from a fresh process's state (no git facts
kept). Prints the git calls (in-process reads of ``.git``/``commondir``/config
and git processes apart) and wall time, and fails if git costs more than 2
calls per distinct folder or any folder resolves to the wrong repository.
Then, on a sample of 100 folders: a cold resolution per folder (the process's
git facts emptied each time) read in-process and through git's two processes
(the previous resolver), which must agree, and a request's resolution (a fresh
resolver per folder in a warm process, as every ``POST /marker`` builds one).
Every process the benchmark's own process starts is counted too (GitPython
runs ``git version`` when it is first imported).

Run: .venv/bin/python -m bench.bench_identity [--repos 50] [--folders 1000]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import tempfile
import time
from pathlib import Path

from brain_kernel.identity.resolver import IdentityResolver, clear_git_caches
from brain_kernel.settings import Settings

_SPAWNED = [0]
_POPEN_INIT = subprocess.Popen.__init__


def _counting_popen(self, *args, **kwargs):  # type: ignore[no-untyped-def]
    _SPAWNED[0] += 1
    _POPEN_INIT(self, *args, **kwargs)


def _ident(hit) -> tuple:  # type: ignore[no-untyped-def]
    return (hit.project, hit.repo, hit.root, hit.worktree, hit.source)


GIT = ["git", "-c", "user.name=bench", "-c", "user.email=bench@example.invalid", "-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false"]


def _git(cwd: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)


def build(base: Path, repos: int, folders: int) -> list[tuple[Path, str, str | None]]:
    """Create the repositories; return (folder, expected repo slug, expected worktree) per working folder."""
    home = base / "home"
    per_repo = folders // repos
    out: list[tuple[Path, str, str | None]] = []
    for i in range(repos):
        org = f"org{i % 7}"
        name = f"svc-{i:02d}" if i % 10 else "api"  # several repos share the key ``api``
        repo = home / "dev" / org / name
        repo.mkdir(parents=True)
        _git(repo, "init", "-q")
        (repo / "README.md").write_text(name)
        _git(repo, "add", "README.md")
        _git(repo, "commit", "-q", "-m", "init")
        _git(repo, "remote", "add", "origin", f"git@github.com:{org}/{name}.git")
        wt = home / "trees" / f"{org}-{name}-fix"
        _git(repo, "worktree", "add", "-q", "-b", "fix", str(wt))
        slug = f"{org}/{name}"
        out.append((repo, slug, None))
        out.append((wt, slug, wt.name))
        n = 0
        while len(out) < (i + 1) * per_repo:
            n += 1
            if n % 4 == 0:
                folder, worktree = wt / "src" / f"m{n}", wt.name
            else:
                folder, worktree = repo / f"pkg{n % 5}" / f"mod{n}" / ("deep" if n % 3 == 0 else ""), None
            folder.mkdir(parents=True, exist_ok=True)
            out.append((folder, slug, worktree))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repos", type=int, default=50)
    parser.add_argument("--folders", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-identity-") as tmp:
        base = Path(tmp).resolve()
        t0 = time.perf_counter()
        cases = build(base, args.repos, args.folders)
        build_s = time.perf_counter() - t0
        settings = Settings.explicit(vault=base / "vault", home=base / ".brain", user_home=base / "home")
        distinct = {str(folder) for folder, _, _ in cases}
        sessions = [c for c in cases for _ in range(2)]
        random.Random(args.seed).shuffle(sessions)

        subprocess.Popen.__init__ = _counting_popen  # type: ignore[method-assign]
        clear_git_caches()
        resolver = IdentityResolver(settings)
        t0 = time.perf_counter()
        wrong = 0
        for folder, slug, worktree in sessions:
            hit = resolver.resolve(str(folder))
            if (hit.repo, hit.worktree, hit.source) != (slug, worktree, "git"):
                wrong += 1
        cached_s = time.perf_counter() - t0
        spawned_main = _SPAWNED[0]

        sample = list(cases)[:: max(1, len(cases) // 100)]
        cold: dict[str, dict] = {}
        for label, in_process in (("in_process", True), ("git_processes", False)):
            calls = reads = processes = 0
            answers = []
            elapsed = 0.0
            for folder, _, _ in sample:
                clear_git_caches()
                fresh = IdentityResolver(settings, in_process=in_process)
                t0 = time.perf_counter()
                answers.append(_ident(fresh.resolve(str(folder))))
                elapsed += time.perf_counter() - t0
                calls, reads, processes = calls + fresh.git_calls, reads + fresh.git_reads, processes + fresh.git_processes
            cold[label] = {"answers": answers, "calls": calls, "reads": reads, "processes": processes, "s": elapsed}
        disagree = sum(1 for a, b in zip(cold["in_process"]["answers"], cold["git_processes"]["answers"], strict=True) if a != b)

        for folder, _, _ in sample:  # warm the process, then one fresh resolver per folder: a request's cost
            IdentityResolver(settings).resolve(str(folder))
        spawned_before = _SPAWNED[0]
        request_calls = 0
        t0 = time.perf_counter()
        for folder, _, _ in sample:
            fresh = IdentityResolver(settings)
            fresh.resolve(str(folder))
            request_calls += fresh.git_calls
        request_s = time.perf_counter() - t0
        request_spawned = _SPAWNED[0] - spawned_before
        subprocess.Popen.__init__ = _POPEN_INIT  # type: ignore[method-assign]

        n = len(sample)
        report = {
            "repos": args.repos,
            "distinct_folders": len(distinct),
            "resolutions": len(sessions),
            "git_calls": resolver.git_calls,
            "git_calls_per_distinct_folder": round(resolver.git_calls / len(distinct), 3),
            "git_reads_in_process": resolver.git_reads,
            "git_processes": resolver.git_processes,
            "processes_spawned_by_the_bench_process": spawned_main,
            "wrong": wrong,
            "resolve_total_s": round(cached_s, 3),
            "resolve_per_session_ms": round(1000 * cached_s / len(sessions), 3),
            "cold_sample": n,
            "cold_in_process_calls_per_folder": round(cold["in_process"]["calls"] / n, 2),
            "cold_in_process_processes": cold["in_process"]["processes"],
            "cold_in_process_per_folder_ms": round(1000 * cold["in_process"]["s"] / n, 2),
            "cold_git_process_calls_per_folder": round(cold["git_processes"]["calls"] / n, 2),
            "cold_git_process_per_folder_ms": round(1000 * cold["git_processes"]["s"] / n, 2),
            "in_process_answers_differing_from_git": disagree,
            "request_fresh_resolver_warm_process_ms": round(1000 * request_s / n, 3),
            "request_git_calls": request_calls,
            "request_processes_spawned": request_spawned,
            "setup_s": round(build_s, 1),
        }
        print(json.dumps(report, indent=2))
        assert wrong == 0, f"{wrong} folders resolved to the wrong repository"
        assert disagree == 0, f"{disagree} in-process answers differ from git's"
        assert resolver.git_calls <= 2 * len(distinct), "more than 2 git calls per distinct folder"


if __name__ == "__main__":
    main()
