"""How the client commands (``brain status``, ``brain feed``, ``brain marker``, ...) reach a running kernel.

The URL is ``--url``, else the client file's ``url`` (``brain connect``
writes it, docs/connect.md), else the local ``brain serve`` default. The
token is ``BRAIN_TOKEN`` (read by the settings object), else the client
file's token, which is sent only to the client file's own URL. The HTTP
client is the one ``brain mcp --remote`` uses (``brain_mcp.remote.Remote``,
httpx): one way to call the kernel, its refusals worded once. The hook keeps
its own lean client (ADR 0042), which never imports httpx.

A call the kernel cannot answer (down, a refused token, a refusal) ends the
command with one ``error:`` line on stderr and exit code 1 (``kernel_errors``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer

from brain_cli.commands.mcp import default_client_file, read_client_file
from brain_cli.common import ExitCode, fail, load_settings

if TYPE_CHECKING:
    from brain_mcp.remote import Remote

F = TypeVar("F", bound=Callable[..., Any])

LOCAL_URL = "http://127.0.0.1:8080"  # brain serve's default address

UrlOption = Annotated[
    str | None,
    typer.Option(
        "--url",
        help="The kernel's URL (default: the client file's url, ~/.config/brain/client.json; else http://127.0.0.1:8080). Example: --url https://brain.internal",
    ),
]


def kernel_target(url: str | None, env_token: str | None) -> tuple[str, str | None, str]:
    """(URL, token, where the token comes from) for a client command (module docstring)."""
    path = default_client_file()
    client = read_client_file(path)
    own = str(client.get("url") or "").rstrip("/")
    base = (url or "").strip().rstrip("/") or own or LOCAL_URL
    if not base.startswith(("http://", "https://")):
        fail(f"--url {base!r} is not an http:// or https:// URL")
    if env_token:
        return base, env_token, "BRAIN_TOKEN"
    token = client.get("token")
    # The client file's token is the kernel's at the file's URL: another URL never receives it.
    if isinstance(token, str) and token and base == own:
        return base, token, str(path)
    return base, None, "nowhere (neither BRAIN_TOKEN nor a client file token for this URL)"


@contextmanager
def kernel(url: str | None) -> Iterator[Remote]:
    """The running kernel at ``url`` (module docstring), its connections closed afterwards."""
    from brain_mcp.remote import Remote

    settings = load_settings()
    base, token, source = kernel_target(url, settings.client_token)
    remote = Remote(base, token, token_source=source)
    try:
        yield remote
    finally:
        remote.close()


def kernel_errors(func: F) -> F:
    """A client command whose kernel refusal (``Refused``) is one error line and exit code 1."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from brain_mcp.remote import Refused

        try:
            return func(*args, **kwargs)
        except Refused as exc:
            fail(str(exc.answer["error"]), ExitCode.FAILED)

    return wrapper  # type: ignore[return-value]


def answered(answer: dict[str, Any]) -> dict[str, Any]:
    """A tool-shaped answer of ``Remote`` (``{"error": ...}`` on failure), or one error line and exit code 1."""
    if "error" in answer:
        fail(str(answer["error"]), ExitCode.FAILED)
    return answer
