"""HTTP clients for the kernel's outbound calls (the LLM, the embeddings endpoint), on one TLS context.

``httpx.Client()`` builds and loads a fresh verifying ``SSLContext`` each time
it is made, even for a plain ``http://`` URL: about 20 ms of CPU here, more
than a local embedding call itself. The context is immutable once made, so
the process builds it once and every client shares it (0.15 ms a client).
"""

from __future__ import annotations

import functools
import ssl
from typing import Any

import httpx


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verifying context ``httpx.Client()`` would make (certifi's roots, ``SSL_CERT_FILE``/``SSL_CERT_DIR`` honoured), made once."""
    return httpx.create_ssl_context()


def client(**options: Any) -> httpx.Client:
    """``httpx.Client(**options)`` on the shared TLS context."""
    return httpx.Client(verify=tls_context(), **options)
