"""Whether a server can listen where it was told to, asked before it opens a database or a vault.

A port held by another process used to surface as uvicorn's ``[Errno 98]``
after the embedded database had started and migrated, with uvicorn's exit
status 3; the bounds of a port are the settings' (``Settings.port``, 1..65535).
"""

from __future__ import annotations

import errno
import socket

from brain_cli.exits import Failure
from brain_kernel.errors import ConfigError


def check_listen(host: str, port: int, names: str) -> None:
    """Bind ``host:port`` and let it go at once; ``names`` are the flag and setting that choose the port.

    A port in use is a Failure (exit 1, ADR 0058): the command and its
    settings are right, and the same command succeeds once the other process
    lets the port go (a kernel still stopping, a restart loop). A host that is
    not this machine's or a port the user may not bind is the configuration's
    to fix: a ConfigError (exit 2).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise ConfigError(f"cannot listen on {host}: {exc.strerror}") from None
    with socket.socket(family, kind, proto) as probe:
        # As uvicorn and gunicorn bind: a port a closed connection still lingers on is free to them.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise Failure(f"port {port} on {host} is already in use: stop what listens there, or choose another port with {names}") from None
            raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror}): choose another port with {names}") from None
