"""``brain mcp`` keeps its vault and database in the per-user data folder, never in the folder it is started in (ADR 0041).

An agent starts ``brain mcp`` over stdio in the user's repository; with the
relative defaults ``brain serve`` documents (``./vault``, ``./.brain``) that
made a second, empty memory inside the repository. The process test runs the
real command there with no kernel variable set and checks the repository is
untouched and the memory is in ``$XDG_DATA_HOME/brain``. The data folder sits
under the checkout's ignored ``.brain/`` (as the embedded ``brain serve``
test's does): run as root, pgserver opens the permissions of every folder
above its data, which must not happen to the test run's temporary root.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from brain_kernel.db.embedded import EmbeddedPostgres
from brain_kernel.settings import KERNEL_VARIABLES, Settings
from tests.mcp.test_mcp import TOOLS, _call
from tests.support.gitrepo import make_repo
from tests.support.harness import REPO_ROOT


def _files(folder: Path) -> set[str]:
    """Every path under ``folder`` but git's own, relative."""
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if ".git" not in p.relative_to(folder).parts}


def test_the_data_folder_is_xdg_data_home_else_local_share_under_the_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert Settings.explicit(user_home=home).user_data_dir == home / ".local" / "share" / "brain"
    assert Settings.explicit(user_home=home, data_home=tmp_path / "xdg").user_data_dir == tmp_path / "xdg" / "brain"
    assert Settings.explicit(user_home=home, data_home=Path("rel")).user_data_dir == home / ".local" / "share" / "brain"  # the XDG rule


def test_only_the_locations_the_environment_left_unset_move_to_the_data_folder(tmp_path: Path) -> None:
    folder = tmp_path / "xdg" / "brain"
    neither = Settings.explicit(data_home=tmp_path / "xdg").in_user_data_dir()
    assert (neither.vault, neither.home) == (folder / "vault", folder / ".brain")
    named = Settings.explicit(data_home=tmp_path / "xdg", vault=tmp_path / "v").in_user_data_dir()
    assert (named.vault, named.home) == (tmp_path / "v", folder / ".brain")
    both = Settings.explicit(data_home=tmp_path / "xdg", vault=Path("vault"), home=Path(".brain")).in_user_data_dir()
    assert (both.vault, both.home) == (Path("vault"), Path(".brain"))  # named, even as the defaults: kept


@pytest.mark.slow
def test_stdio_started_in_a_repository_writes_nothing_there_and_keeps_its_memory_in_the_data_folder(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo", remote="git@github.com:org1/api.git")
    before = _files(repo)
    xdg = REPO_ROOT / ".brain" / f"mcp-xdg-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith(KERNEL_VARIABLES) and not k.startswith("XDG_")}
    env.update({"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(xdg)})
    params = StdioServerParameters(command=sys.executable, args=["-m", "brain_cli", "mcp"], env=env, cwd=str(repo))
    answers: dict[str, Any] = {}

    async def session() -> None:
        with (tmp_path / "mcp-stdio.err").open("w") as errlog:
            # The first start creates and migrates the embedded database: allow it the time.
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=120) as client:
                answers["tools"] = {tool.name for tool in (await client.list_tools()).tools}
                lesson = {"type": "lesson", "content": "Lesson: the data folder is per user.", "attrs": {"cwd": str(repo), "source": "mcp-test"}}
                answers["marker"] = await _call(client, "brain_marker", lesson)

    try:
        anyio.run(session)
        assert answers["tools"] == TOOLS, (tmp_path / "mcp-stdio.err").read_text()
        assert _files(repo) == before, "brain mcp wrote into the repository it was started in"
        data = xdg / "brain"
        assert (data / "vault" / "clusters").is_dir() and (data / ".brain" / "pgdata" / "PG_VERSION").is_file()
        assert (data / "vault" / answers["marker"]["vault_path"]).is_file()
        assert not (tmp_path / "home" / ".local" / "share" / "brain").exists()  # XDG_DATA_HOME wins over the home
    finally:
        _stop_left_running(xdg / "brain" / ".brain" / "pgdata")
        shutil.rmtree(xdg, ignore_errors=True)


def _stop_left_running(pgdata: Path) -> None:
    """Stop the embedded server if the client's kill (2 s after closing stdin) cut ``brain mcp``'s own stop short.

    A server left so is reused by the next start (``brain_kernel.db.embedded``);
    here there is no next start, and removing its folder would orphan it.
    """
    deadline = time.monotonic() + 10
    while (pgdata / "postmaster.pid").exists() and time.monotonic() < deadline:  # a stop in progress
        time.sleep(0.2)
    if (pgdata / "postmaster.pid").exists():
        server = EmbeddedPostgres(pgdata)
        server.start()
        server.stop()  # the last live holder: it stops
