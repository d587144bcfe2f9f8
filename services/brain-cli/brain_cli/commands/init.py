"""``brain init``: the bootstrap of the compose stack: ``.env`` from ``.env.example`` with generated secrets, and the vault.

Upstream's bootstrap (UPSTREAM.md 6) replaced each ``__GENERATE__`` of its
template with 32 random bytes as hex and scaffolded ``./vault`` without
overwriting; this does the same from the repository's ``.env.example``, the
one list of the stack's variables, which brain ships as ``brain_cli/env.example``. A rerun is safe: every variable an
existing ``.env`` sets keeps its value (secrets are never regenerated, so the
database volume's password still matches), variables the template gained
since are added, and lines the template does not know are kept at the end.
An upstream ``.env`` works as the existing file: its ``KB_ROUTER_TOKEN``
becomes ``BRAIN_TOKENS`` (compose.yml requires that name). The file is
written atomically with mode 0600.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

import typer
import yaml

from brain_cli.common import fail, load_settings, operator_errors, output_file
from brain_kernel.settings import PLACEHOLDER_SECRET as PLACEHOLDER
from brain_kernel.vault_store import Vault

# ``NAME=value`` lines, and the commented ``# NAME=value`` lines that document a default.
_ASSIGNMENT = re.compile(r"^(?P<comment>#\s*)?(?P<name>[A-Z][A-Z0-9_]*)=(?P<value>.*)$")
# Upstream's token variables, taken over as BRAIN_TOKENS when the existing file has no BRAIN_TOKENS.
_UPSTREAM_TOKENS = ("KB_ROUTER_TOKENS", "KB_ROUTER_TOKEN")
IMAGE_UID = 10001  # the image's non-root user and group (Dockerfile)


def parse_env(text: str) -> dict[str, str]:
    """The variables an env file sets (uncommented ``NAME=value`` lines; surrounding quotes removed)."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _ASSIGNMENT.match(line.strip())
        if match and not match["comment"]:
            value = match["value"].strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            values[match["name"]] = value
    return values


@dataclass
class Rendered:
    """An env file's new text and what went into it."""

    text: str
    generated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    machine: list[str] = field(default_factory=list)


def render_env(template: str, existing: Mapping[str, str], machine: Mapping[str, str], new_secret: Callable[[], str]) -> Rendered:
    """The env file: the template's lines with existing values kept, machine values filled, placeholders replaced.

    For each variable the template sets: the existing file's value wins; else
    a ``machine`` value (this host's uid, home, folders); else the template's
    value, a ``__GENERATE__`` becoming ``new_secret()``. A commented template
    line stays commented unless the existing file sets that variable. The
    existing file's other variables follow at the end.
    """
    existing = dict(existing)
    if "BRAIN_TOKENS" not in existing:
        for name in _UPSTREAM_TOKENS:
            if existing.get(name):
                existing["BRAIN_TOKENS"] = existing[name]
                break
    out = Rendered(text="")
    lines: list[str] = []
    seen: set[str] = set()
    for line in template.splitlines():
        match = _ASSIGNMENT.match(line.strip())
        if not match:
            lines.append(line)
            continue
        name, value, commented = match["name"], match["value"], bool(match["comment"])
        seen.add(name)
        if name in existing:
            lines.append(f"{name}={existing[name]}")
            out.kept.append(name)
        elif commented and name not in machine:
            lines.append(line)
        elif name in machine:
            lines.append(f"{name}={machine[name]}")
            out.machine.append(name)
        elif value.strip() == PLACEHOLDER:
            lines.append(f"{name}={new_secret()}")
            out.generated.append(name)
        else:
            lines.append(line)
    extra = [name for name in existing if name not in seen]
    if extra:
        lines += ["", "# -- kept from the previous .env (not in the template) --"]
        lines += [f"{name}={existing[name]}" for name in extra]
        out.kept += extra
    out.text = "\n".join(lines) + "\n"
    return out


def shipped_template() -> str:
    """The template brain ships, package data so a pip-installed ``brain init`` works in any folder.

    It is the one file: the repository's ``.env.example`` is a link to it, so
    compose users copy the same text (the image's build context holds only
    ``services/``, so the link points this way).
    """
    from importlib.resources import files

    return files("brain_cli").joinpath("env.example").read_text(encoding="utf-8")


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file + rename), readable by the owner only."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _closed_to_others(folder: Path) -> Path | None:
    """The first folder on the way to ``folder`` that other users cannot pass (no ``o+x``: ``/root`` is 0700 on
    Debian), else None; a folder that does not exist says nothing yet."""
    for step in [*reversed(folder.parents), folder]:
        try:
            mode = step.stat().st_mode
        except OSError:
            return None
        if not mode & 0o001:
            return step
    return None


def _give_to_image_user(root: Path) -> None:
    """Hand the vault's root-owned files to the image's user (``brain init`` run as root)."""
    for path in [root, *root.rglob("*")]:
        if path.lstat().st_uid == 0 and not path.is_symlink():
            os.chown(path, IMAGE_UID, IMAGE_UID)


def write_helm_values(path: Path, new_secret: Callable[[], str]) -> dict[str, object]:
    """Fill the chart's secrets a render must not generate (it would rotate them on every GitOps sync)."""
    existing = path.read_text(encoding="utf-8") if path.is_file() else ""
    try:
        values = yaml.safe_load(existing) or {}
    except yaml.YAMLError as error:
        fail(f"{path}: not a YAML values file ({error})")
    if not isinstance(values, dict):
        fail(f"{path}: not a YAML values file (a mapping at the top)")
    generated: list[str] = []
    chart_secrets = values.setdefault("secrets", {})
    if not chart_secrets.get("tokens"):
        chart_secrets["tokens"] = [new_secret()]
        generated.append("secrets.tokens")
    config = values.get("config") if isinstance(values.get("config"), dict) else {}
    moved = config.pop("BRAIN_TRIAL_SALT", None)  # an older file's salt, a plain env var there: kept, so no arm moves
    if moved and not chart_secrets.get("trialSalt"):
        chart_secrets["trialSalt"] = moved
        generated.append("secrets.trialSalt (moved from config)")
    if not config and "config" in values:
        del values["config"]
    if not chart_secrets.get("trialSalt"):
        chart_secrets["trialSalt"] = new_secret()
        generated.append("secrets.trialSalt")
    if generated:
        header = "# brain init --helm-values: secrets generated once; keep this file out of version control.\n"
        _write_private(path, header + yaml.safe_dump(values, sort_keys=False))
    return {"helm_values": str(path), "created": not existing, "generated": generated}


@operator_errors
def init(
    env_file: Path = typer.Option(Path(".env"), "--env-file", help="The env file to write (kept values survive a rerun). Example: --env-file .env"),
    template: Path = typer.Option(
        None,
        "--template",
        help="The documented template it is made from (default: the one brain ships, the repository's .env.example). Example: --template .env.example",
    ),
    vault: Path = typer.Option(
        None, "--vault", help="Host vault folder to scaffold (default: VAULT_ROOT_HOST of the env file, else ./vault). Example: --vault ~/vault"
    ),
    no_vault: bool = typer.Option(False, "--no-vault", help="Write the env file only; do not scaffold the vault. Example: brain init --no-vault"),
    git: bool = typer.Option(
        False,
        "--git",
        help="Also make the vault a git repository with the .gitattributes and .gitignore brain sync uses. Example: brain init --git",
    ),
    helm_values: Path = typer.Option(
        None,
        "--helm-values",
        help="Write the Helm chart's generated secrets (a token, the trial salt) to this values file instead; kept on a rerun. "
        "Example: brain init --helm-values brain-secrets.yaml",
    ),
) -> None:
    """Prepare `docker compose up`: write .env with generated secrets and scaffold the vault.

    Every __GENERATE__ of the template (.env.example) becomes a new secret
    (32 random bytes as hex); HOST_UID, HOST_GID, BRAIN_USER_HOME,
    CLAUDE_DIR_HOST and CODEX_DIR_HOST are filled for this machine; the vault
    folder gets the upstream layout (existing files are never touched). Safe
    to rerun: values already in the env file are kept, so secrets never
    change under a running database; an upstream .env's KB_ROUTER_TOKEN is
    taken over as BRAIN_TOKENS. Prints a JSON summary; no secret is printed.

    With --git the vault also becomes a git repository (branch main) with
    the .gitattributes (shared logs merge by union) and .gitignore (derived
    files) that brain sync uses; an existing repository is kept.

    With --helm-values FILE it writes the chart's values instead (ADR 0053):
    secrets.tokens and secrets.trialSalt generated once, every value
    the file already holds kept; no env file, no vault.

    Example: brain init && docker compose up -d
    """
    if helm_values is not None:
        typer.echo(json.dumps(write_helm_values(output_file(helm_values, "--helm-values"), lambda: secrets.token_hex(32))))
        return
    env_file = output_file(env_file, "--env-file")
    if template is not None and not template.is_file():
        fail(f"{template}: template not found")
    settings = load_settings()
    existing = parse_env(env_file.read_text(encoding="utf-8")) if env_file.is_file() else {}
    # Containers never run as root: run as root here, they get the image's user, who is given the vault.
    as_root = os.getuid() == 0
    machine = {
        "HOST_UID": str(IMAGE_UID if as_root else os.getuid()),
        "HOST_GID": str(IMAGE_UID if as_root else os.getgid()),
        "BRAIN_USER_HOME": str(settings.user_home),
        "CLAUDE_DIR_HOST": str(settings.resolved_claude_dir),
        "CODEX_DIR_HOST": str(settings.resolved_codex_dir),
    }
    rendered = render_env(
        template.read_text(encoding="utf-8") if template is not None else shipped_template(), existing, machine, lambda: secrets.token_hex(32)
    )
    _write_private(env_file, rendered.text)
    if as_root:
        for name in ("CLAUDE_DIR_HOST", "CODEX_DIR_HOST"):
            closed = _closed_to_others(Path(parse_env(rendered.text).get(name) or machine[name]))
            if closed is not None:
                typer.echo(
                    f"warning: {name}: {closed} is closed to other users, and the containers run as uid {IMAGE_UID}: "
                    "they will not read these transcripts; point it at a folder they can read",
                    err=True,
                )
    summary: dict[str, object] = {
        "env_file": str(env_file),
        "created": not existing,
        "generated": rendered.generated,
        "kept": rendered.kept,
        "machine": rendered.machine,
        "vault": None,
    }
    if not no_vault:
        values = parse_env(rendered.text)
        root = vault or Path(values.get("VAULT_ROOT_HOST") or "vault")
        if not root.is_absolute():
            root = env_file.parent / root
        root = root.expanduser()
        Vault(root).scaffold()
        if git:
            from brain_ops.vault_sync import init_repository

            summary["git"] = asdict(init_repository(Vault(root)))
        if as_root:  # after git init: the repository is the image user's too, so the kernel's git accepts it
            _give_to_image_user(root)
        summary["vault"] = str(root.resolve())
    typer.echo(json.dumps(summary))
